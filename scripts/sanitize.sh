#!/usr/bin/env bash
# On a GPU machine: runs every [gpu] test binary and every example under compute-sanitizer's
# memcheck (with --leak-check full), racecheck, synccheck and initcheck, and ends with a
# table of tool x binary -> errors (also OUT_DIR/sanitizers.md).
#   scripts/sanitize.sh OUT_DIR [BUILD_DIR]
# Left out: [timing] test cases (a sanitizer slows every kernel; other cases skip their
# timing bounds through GPUCMP_TEST_NO_TIMING=1) and [cupti] ones (kernel mode: CUPTI and
# compute-sanitizer cannot both attach to a process). Test cases that provoke a CUDA API
# error on purpose are tagged [api_error]: they run in a second invocation per binary in
# which API errors are not reported; every other error still counts there.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
out_dir=${1:?usage: sanitize.sh OUT_DIR [BUILD_DIR]}
build_dir=${2:-$build_dir}
mkdir -p "$out_dir"
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
[ -x "$sanitizer" ] || { echo "sanitize: compute-sanitizer not found" >&2; exit 1; }
export GPUCMP_TEST_NO_TIMING=1
tests=(gpucmp_gpu_tests gpucmp_gbench_tests gpucmp_ops_tests gpucmp_models_tests)
examples=(01_engine_custom_kernel 03_modes_side_by_side 04_verified_ops 05_serving_latency 06_concurrency
          07_resnet50_table 08_custom_cnn)
tools=(memcheck racecheck synccheck initcheck)
declare -A errors
status=0
# Runs one program under one tool; adds its error count (or "crash") to the table cell.
# GPUCMP_SANITIZE_STOP_AFTER_S: start nothing past this many seconds (a lease's end): the
# cells not reached read "not run".
sanitize_start=$(date +%s)
run_one() {  # tool cell log program args...
  local tool=$1 cell=$2 log=$3; shift 3
  if [ -n "${GPUCMP_SANITIZE_STOP_AFTER_S:-}" ] && [ $(( $(date +%s) - sanitize_start )) -gt "$GPUCMP_SANITIZE_STOP_AFTER_S" ]; then
    return
  fi
  local extra=()
  [ "$tool" = memcheck ] && extra=(--leak-check full)
  # GPUCMP_SANITIZE_TIMEOUT_S: end one program past this many seconds (its cell says so).
  local limit=()
  [ -n "${GPUCMP_SANITIZE_TIMEOUT_S:-}" ] && limit=(timeout "$GPUCMP_SANITIZE_TIMEOUT_S")
  "${limit[@]}" "$sanitizer" --tool "$tool" "${extra[@]}" --error-exitcode 99 --print-limit 20 "${SANITIZE_API:-}" "$@" \
    > "$log" 2>&1
  local rc=$?
  local n
  # racecheck ends with "RACECHECK SUMMARY: N hazards displayed (E errors, W warnings)".
  n=$(sed -n 's/.*ERROR SUMMARY: \([0-9]*\) error.*/\1/p; s/.*RACECHECK SUMMARY: .*(\([0-9]*\) errors.*/\1/p' "$log" | tail -1)
  if [ $rc -eq 124 ] && [ -n "${GPUCMP_SANITIZE_TIMEOUT_S:-}" ]; then n="time limit (${GPUCMP_SANITIZE_TIMEOUT_S} s)"; status=1
  elif [ -z "$n" ]; then n="crash (exit $rc)"; status=1
  elif [ "$n" != 0 ] || { [ $rc -ne 0 ] && [ $rc -ne 99 ]; }; then status=1; fi
  [ $rc -ne 0 ] && [ $rc -ne 99 ] && n="$n, exit $rc"
  errors[$cell]="${errors[$cell]:+${errors[$cell]} + }$n"
}
for tool in "${tools[@]}"; do
  for t in "${tests[@]}"; do
    bin="$build_dir/tests/$t"
    [ -x "$bin" ] || continue
    SANITIZE_API=--report-api-errors=explicit run_one "$tool" "$tool|$t" "$out_dir/${tool}_${t}.log" \
      "$bin" "[gpu]~[timing]~[cupti]~[api_error]"
    if "$bin" --list-tests "[api_error]" 2>/dev/null | grep -q "^  [a-zA-Z]"; then
      SANITIZE_API=--report-api-errors=no run_one "$tool" "$tool|$t" "$out_dir/${tool}_${t}_api_error.log" \
        "$bin" "[gpu][api_error]~[timing]~[cupti]"
    fi
  done
  for e in "${examples[@]}"; do
    bin="$build_dir/examples/$e"
    [ -x "$bin" ] || continue
    args=()
    [ "$e" = 08_custom_cnn ] && args=(--benchmark_min_time=0)
    SANITIZE_API=--report-api-errors=explicit run_one "$tool" "$tool|$e" "$out_dir/${tool}_${e}.log" "$bin" "${args[@]}"
  done
done
{
  echo "| binary | memcheck | racecheck | synccheck | initcheck |"
  echo "|---|---|---|---|---|"
  for b in "${tests[@]}" "${examples[@]}"; do
    line="| $b |"
    for tool in "${tools[@]}"; do line+=" ${errors[$tool|$b]:-not run} |"; done
    echo "$line"
  done
} > "$out_dir/sanitizers.md"
cat "$out_dir/sanitizers.md"
echo "sanitize: $([ $status -eq 0 ] && echo "0 errors" || echo "ERRORS (logs in $out_dir)")"
exit $status
