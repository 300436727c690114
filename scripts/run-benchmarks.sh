#!/usr/bin/env bash
# The main job: installs what is missing, builds gpucmp, runs the bundled suite and prints
# this GPU (measured) side by side with A100, L20 and L40S (projected). Results go to
# RESULTS_DIR (default: results/local): suite.json, report.{md,csv,html}, spin_table.*.
# On a machine without a GPU it says so, prints the spec comparison of those GPUs with the
# comparison articles' errors flagged, and the report of the H200 results in results/h200/.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
results_dir=${1:-$repo_root/results/local}
compare_with=a100_80gb_sxm,l20,l40s
"$repo_root/scripts/install-deps.sh"
# It turns on what it needs and builds only its own programs, leaving every other cache
# option as it was: the test script that may run after it in the same folder finds its
# tests still there.
GPUCMP_EXTRA_CMAKE_ARGS="${GPUCMP_EXTRA_CMAKE_ARGS:-} -DGPUCMP_BUILD_BENCHMARKS=ON -DGPUCMP_BUILD_TOOLS=ON" gpucmp_configure
gpucmp_build --target gpucmp-report spin_table suite
report="$build_dir/tools/report/gpucmp-report"
mkdir -p "$results_dir"

if ! gpu_present; then
  echo
  echo "No NVIDIA GPU on this machine: nothing can be measured here. Showing the datasheets and"
  echo "the H200 reference results (results/h200/suite.json) with projections instead."
  echo
  "$report" specs a100_80gb_sxm l20 l40s h200_sxm --errata
  echo
  "$report" compare "$repo_root/results/h200/suite.json" --project "$compare_with" \
    --markdown "$results_dir/report.md" --html "$results_dir/report.html" --csv "$results_dir/report.csv"
  cat "$results_dir/report.md"
  exit 0
fi

"$build_dir/benchmarks/spin_table" --out "$results_dir" > /dev/null
"$build_dir/benchmarks/suite" --benchmark_out="$results_dir/suite.json" --benchmark_out_format=json
"$report" compare "$results_dir/suite.json" --project "$compare_with" \
  --markdown "$results_dir/report.md" --html "$results_dir/report.html" --csv "$results_dir/report.csv"
echo
cat "$results_dir/report.md"
echo
echo "results written to $results_dir (open report.html for the charts)"
