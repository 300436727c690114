#!/usr/bin/env bash
# The main job: installs what is missing, builds gpucmp and runs the bundled benchmarks,
# writing JSON and markdown into RESULTS_DIR (default: results/local). On a machine without
# a GPU it says so and shows the reference results committed under results/h200/.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
results_dir=${1:-$repo_root/results/local}
"$repo_root/scripts/install-deps.sh"
GPUCMP_EXTRA_CMAKE_ARGS="${GPUCMP_EXTRA_CMAKE_ARGS:-} -DGPUCMP_BUILD_TESTS=OFF" gpucmp_configure
gpucmp_build

if ! gpu_present; then
  echo
  echo "No NVIDIA GPU on this machine: nothing can be measured here."
  echo "Reference results measured on an H200 (results/h200/spin_table.md):"
  echo
  cat "$repo_root/results/h200/spin_table.md"
  exit 0
fi

mkdir -p "$results_dir"
"$build_dir/examples/02_gbench_kernel" --benchmark_out="$results_dir/saxpy.json" --benchmark_out_format=json
"$build_dir/examples/03_modes_side_by_side" | tee "$results_dir/modes.md"
echo
"$build_dir/benchmarks/spin_table" --out "$results_dir"
echo
echo "results written to $results_dir"
