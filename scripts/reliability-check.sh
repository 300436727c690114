#!/usr/bin/env bash
# On a GPU machine: the reliability issue's measurements.
#   scripts/reliability-check.sh OUT_DIR [RUNS]
# 1. builds for the local GPU; 2. runs the whole [gpu] suite RUNS times in a row (default 5),
# each test binary with Catch2's XML report of every assertion, plus the fault suite and the
# CUPTI-taken check; 3. sizes the timing bounds' margins from those runs
# (timing_margins.md); 4. probes NVML's energy counter and runs the bundled suite with
# --gpucmp_power (power averages against the limit); 5. scripts/sanitize.sh; 6. writes
# measures.json (lab/acceptance/reliability_measures.py) and run.json (the commit, from
# GPUCMP_COMMIT or git, and the date). Copy them to results/h200/reliability/<part>/ and run
# `lab/acceptance/acceptance.py lab/acceptance/reliability.json`: each row reads its part's
# numbers and is stale when the code it covers changed after that part's commit.
# GPUCMP_RELIABILITY_PARTS picks the steps (default "suite power"; add "sanitize" for 5):
# one device call cannot hold them all, so each call can make a part (and the suite's runs can
# go on in the next call: GPUCMP_RELIABILITY_RESUME below).
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
out_dir=${1:?usage: reliability-check.sh OUT_DIR [RUNS]}
runs=${2:-5}
mkdir -p "$out_dir"
gpu_present || { echo "reliability-check: no NVIDIA GPU here" >&2; exit 1; }
gpucmp_local_architecture
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,power.limit,temperature.gpu --format=csv > "$out_dir/gpu.csv"
"$repo_root/scripts/install-deps.sh" > "$out_dir/install.log" 2>&1
parts=" ${GPUCMP_RELIABILITY_PARTS:-suite power} "
[ "${GPUCMP_RELIABILITY_SANITIZE:-0}" = 1 ] && parts+="sanitize "
part() { [[ "$parts" == *" $1 "* ]]; }
# The examples and benchmarks are needed by the power and sanitizer parts only.
programs=OFF
{ part power || part sanitize; } && programs=ON
start=$(date +%s)
# The first run of a fresh machine also reads the CUDA libraries from disk: read them while
# the compiler runs, so that run 1 is timed like the others.
(ldconfig -p | awk '/libcudnn|libcublas|libcupti|libnvrtc/ {print $NF}' | sort -u | xargs -r cat > /dev/null 2>&1 &)
{ GPUCMP_EXTRA_CMAKE_ARGS="${GPUCMP_EXTRA_CMAKE_ARGS:-} -DGPUCMP_BUILD_TESTS=ON -DGPUCMP_BUILD_EXAMPLES=$programs \
    -DGPUCMP_BUILD_BENCHMARKS=$programs -DGPUCMP_BUILD_LAB=$programs" gpucmp_configure && gpucmp_build; } > "$out_dir/build.log" 2>&1 \
  || { echo "reliability-check: build failed"; tail -40 "$out_dir/build.log"; exit 1; }
echo "build: $(( $(date +%s) - start )) s"

binaries=(gpucmp_gpu_tests gpucmp_gbench_tests gpucmp_ops_tests gpucmp_models_tests)
# GPUCMP_RELIABILITY_RESUME=1 goes on with the runs already in OUT_DIR, made by an earlier call on
# this same GPU with this build (OUT_DIR inside the build folder survives between the calls of
# one warm machine): a suite run outlasts a third of a device call, so RUNS in a row span calls.
uuid=$(nvidia-smi --query-gpu=uuid --format=csv,noheader | head -1)
first_run=1
if part suite && [ "${GPUCMP_RELIABILITY_RESUME:-0}" = 1 ] && [ -s "$out_dir/suite_runs.tsv" ]; then
  [ "$(cat "$out_dir/gpu_uuid" 2>/dev/null)" = "$uuid" ] ||
    { echo "reliability-check: cannot resume: the runs in $out_dir were made on another GPU (or none is recorded)" >&2; exit 1; }
  first_run=$(( $(tail -1 "$out_dir/suite_runs.tsv" | cut -f1) + 1 ))
  echo "[gpu] suite: resuming at run $first_run of $runs"
else
  part suite && : > "$out_dir/suite_runs.tsv" && : > "$out_dir/binary_times.tsv" && : > "$out_dir/compute_cache_kb.tsv"
fi
echo "$uuid" > "$out_dir/gpu_uuid"
part suite || runs=0
for run in $(seq "$first_run" "$runs"); do
  # GPUCMP_RELIABILITY_STOP_AFTER_S: start no further run past this many seconds (a lease's end).
  if [ -n "${GPUCMP_RELIABILITY_STOP_AFTER_S:-}" ] && [ $(( $(date +%s) - start )) -gt "$GPUCMP_RELIABILITY_STOP_AFTER_S" ]; then
    echo "[gpu] suite: stopping before run $run (past ${GPUCMP_RELIABILITY_STOP_AFTER_S} s)"; break
  fi
  dir="$out_dir/run$run"
  mkdir -p "$dir"
  t0=$(date +%s)
  failed=0
  for b in "${binaries[@]}"; do
    tb=$(date +%s)
    rc=0
    "$build_dir/tests/$b" "[gpu]" -s -d yes -r xml -o "$dir/$b.xml" > "$dir/$b.log" 2>&1 || { rc=$?; failed=$((failed + 1)); }
    printf '%s\t%s\t%s\t%s\n' "$run" "$b" "$(( $(date +%s) - tb ))" "$rc" >> "$out_dir/binary_times.tsv"
  done
  python3 "$repo_root/tests/gpu/check_fault_suite.py" "$build_dir/tests/gpucmp_fault_suite" "$dir/faults" \
    > "$dir/faults.log" 2>&1 || failed=$((failed + 1))
  python3 "$repo_root/tests/gpu/check_cupti_taken.py" "$build_dir/tests/gpucmp_cupti_taken" "$dir/cupti_taken" \
    > "$dir/cupti_taken.log" 2>&1 || failed=$((failed + 1))
  printf '%s\t%s\t%s\n' "$run" "$failed" "$(( $(date +%s) - t0 ))" >> "$out_dir/suite_runs.tsv"
  # Run 1 of a fresh machine is slower: the size of the driver's JIT cache after each run
  # says whether that cache is why.
  printf '%s\t%s\n' "$run" "$(du -sk "${CUDA_CACHE_PATH:-$HOME/.nv/ComputeCache}" 2>/dev/null | cut -f1)" \
    >> "$out_dir/compute_cache_kb.tsv"
  echo "[gpu] suite run $run: $failed binaries failed, $(( $(date +%s) - t0 )) s"
done
part suite && python3 "$repo_root/scripts/reliability/timing_margins.py" "$repo_root" "$out_dir"/run* > "$out_dir/timing_margins.md"

if part power; then
  "$build_dir/lab/power_counter_probe" "$out_dir/power_counter.json" > "$out_dir/power_counter.log" 2>&1
  cat "$out_dir/power_counter.log"
  "$build_dir/benchmarks/suite" --gpucmp_power --benchmark_out="$out_dir/suite_power.json" --benchmark_out_format=json \
    > "$out_dir/suite_power.txt" 2>&1 || echo "suite with --gpucmp_power failed (see suite_power.txt)"
fi

if part sanitize; then
  "$repo_root/scripts/sanitize.sh" "$out_dir/sanitize" "$build_dir" > "$out_dir/sanitize.log" 2>&1
  tail -20 "$out_dir/sanitize.log"
fi
python3 "$repo_root/lab/acceptance/reliability_measures.py" "$repo_root" "$out_dir"
printf '{"commit": "%s", "date": "%s", "parts": "%s"}\n' "$(gpucmp_tree_commit)" \
  "$(date -u +%F)" "$(echo $parts)" > "$out_dir/run.json"
