#!/usr/bin/env bash
# On a GPU machine: runs every [gpu] test binary and every example under compute-sanitizer's
# memcheck (with --leak-check full), racecheck, synccheck and initcheck, and ends with a
# table of tool x binary -> errors (also OUT_DIR/sanitizers.md; the logs and cells packed in
# OUT_DIR/sanitize.tgz, refreshed as each program ends).
#   scripts/sanitize.sh OUT_DIR [BUILD_DIR]
# Left out: [timing] test cases (a sanitizer slows every kernel; other cases skip their
# timing bounds through GPUCMP_TEST_NO_TIMING=1) and [cupti] ones (kernel mode: CUPTI and
# compute-sanitizer cannot both attach to a process). Test cases that provoke a CUDA API
# error on purpose are tagged [api_error]: they run with API errors not reported; every other
# error still counts there.
# Programs run GPUCMP_SANITIZE_JOBS at a time (default 1). Nothing is timed, but sharing does
# not pay on the H200: memcheck of gpucmp_models_tests ended within 45 s alone and ran past
# 370 s as one of 8 (results/h200/reliability/sanitizers.md).
# Each test case runs in a process of its own (compute-sanitizer's start-up is about a second),
# so a time limit ends one case, names it, and costs none of the others' results; cells are
# kept per case (part c<hash of the name>, a<hash> for [api_error] cases), and several calls
# can fill one binary's cells between them. Each case's duration goes to its log (-d yes).
# Test searches are paced for sanitizers (tests/gpu/search_pace.hpp): every candidate runs,
# each step once.
# racecheck and synccheck track GPUCMP_SANITIZE_CUDA_BARRIERS cuda::barrier objects per
# block (default 512; empty: the tool's default). On the H200 synccheck overflowed its
# tracking on cuDNN's fused-convolution kernels with the default and with 64, and the launch
# failed; 512 ran the fused-layer case clean; 8192 left the tool without memory to track
# launches (results/h200/reliability/sanitizers.md).
# One device call may not hold every tool over every program: GPUCMP_SANITIZE_TOOLS,
# GPUCMP_SANITIZE_PROGRAMS and GPUCMP_SANITIZE_CASES (space-separated names; a case by its
# part, as OUT_DIR/cases.tsv lists them) pick a part, and
#   scripts/sanitize.sh --table OUT_DIR SOURCE...
# writes the whole table from the cells of several calls (a cell made again in a later source
# replaces the earlier one; "not run" replaces nothing), running nothing. A source is a call's
# cells/ folder or its cells.tsv (tool, binary, part, result, seconds and, for a test case,
# its name per line: one small file to commit per call, so the table can grow over several
# sessions' device time).
# The scope (docs/reliability.md#compute-sanitizer): memcheck (with leak checking) and
# initcheck count every finding in every kernel; racecheck and synccheck look at gpucmp's
# kernels. Findings of those two inside a vendor's kernel (with GPUCMP_SANITIZE_VENDOR_KERNELS=1)
# and the tool's own errors go to OUT_DIR/vendor.tsv and vendor.md instead (kernel, libraries,
# the command that reproduces it; scripts/reliability/sanitizer_findings.py), counted neither as
# a pass nor as a fail; --table reads X.vendor.tsv beside each X.tsv source.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
table_only=0
if [ "${1:-}" = --table ]; then table_only=1; shift; fi
out_dir=${1:?usage: sanitize.sh OUT_DIR [BUILD_DIR] | sanitize.sh --table OUT_DIR CELLS_DIR_OR_TSV...}
shift
mkdir -p "$out_dir"
tests=(gpucmp_gpu_tests gpucmp_gbench_tests gpucmp_ops_tests gpucmp_models_tests gpucmp_multigpu_tests)
examples=(01_engine_custom_kernel 02_gbench_kernel 03_modes_side_by_side 04_verified_ops 05_serving_latency
          06_concurrency 07_resnet50_table 08_custom_cnn 09_train_custom_cnn)
findings_py="$repo_root/scripts/reliability/sanitizer_findings.py"
tools=(memcheck racecheck synccheck initcheck)
status=0
cells="$out_dir/cells"
if [ $table_only = 1 ]; then
  [ $# -gt 0 ] || { echo "sanitize: --table needs at least one cells folder or cells.tsv" >&2; exit 2; }
  rm -rf "$cells" && mkdir -p "$cells"
  vendor_sources=()
  for d in "$@"; do
    # A source's vendor findings sit beside it: X.vendor.tsv for X.tsv, a cells folder's call's vendor.tsv.
    if [ -d "$d" ]; then vendor_sources+=("$(dirname "$d")/vendor.tsv"); else vendor_sources+=("${d%.tsv}.vendor.tsv"); fi
    if [ -d "$d" ]; then
      cp "$d"/* "$cells"/ 2>/dev/null
    elif [ -f "$d" ]; then
      while IFS=$'\t' read -r tool name part result _; do
        [[ "$tool" =~ ^(memcheck|racecheck|synccheck|initcheck)$ && "$name" =~ ^[A-Za-z0-9_]+$ && "$part" =~ ^[A-Za-z0-9]+$ && -n "$result" ]] ||
          { echo "sanitize: $d: not a cells.tsv line: $tool $name $part $result" >&2; exit 2; }
        cell="$cells/$tool.$name.$part"
        # A case that a later call did not reach keeps what an earlier call found.
        [ "$result" = "not run" ] && [ -e "$cell" ] && continue
        # Cells kept per test case replace a binary's cells of the shards earlier calls ran.
        [[ "$part" =~ ^[ca][0-9a-f]{10}$ ]] && find "$cells" -name "$tool.$name.*" ! -name "$tool.$name.[ca]??????????" -delete
        echo "$result" > "$cell"
      done < "$d"
    else
      echo "sanitize: $d is neither a folder of cells nor a cells.tsv" >&2; exit 2
    fi
  done
else
  build_dir=${1:-$build_dir}
  sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  [ -x "$sanitizer" ] || { echo "sanitize: compute-sanitizer not found" >&2; exit 1; }
  rm -rf "$cells" && mkdir -p "$cells"
  : > "$out_dir/vendor.tsv"
  vendor_sources=("$out_dir/vendor.tsv")
  sanitizer_version=$("$sanitizer" --version 2>/dev/null | grep -o 'Version [^ ]*' | head -1)
fi
export GPUCMP_TEST_NO_TIMING=1
# A tool instruments a module as it loads. With lazy loading (CUDA's default) that is at a
# kernel's first launch, and the launch then waits for the stream: behind the engine's stream
# hold it waited for the hold's watchdog under every tool, while without a tool it returned in
# 0.04 ms (lab/probes/hold-probe.sh; results/h200/reliability/hold_probe.md). Load
# every module when the program starts instead.
export CUDA_MODULE_LOADING=${CUDA_MODULE_LOADING:-EAGER}
# picked NAME: true when NAME is in the space-separated list $2 (or the list is empty).
picked() { [ -z "$2" ] || [[ " $2 " == *" $1 "* ]]; }
jobs=${GPUCMP_SANITIZE_JOBS:-1}
[ "$jobs" -ge 1 ] || jobs=1
barriers=${GPUCMP_SANITIZE_CUDA_BARRIERS-512}
# racecheck and synccheck check how a kernel's threads share memory and meet at barriers: the
# kernel's author's work. They check gpucmp's kernels (every mangled name holds "gpucmp": the
# library's namespace and the tests' gpucmp_test) and the examples' own (saxpy), not cuBLAS's
# and cuDNN's: on those racecheck took 13 times memcheck's time (example 04: 321 s against
# 24 s), reported hazards in cuBLAS's nvjet kernels and synccheck ran out of barrier tracking
# in cuDNN's (results/h200/reliability/sanitizers.md). memcheck and initcheck check every
# kernel: what a library kernel reads and writes are buffers gpucmp sized.
# GPUCMP_SANITIZE_VENDOR_KERNELS=1 checks every kernel with these two as well.
own_kernels=(--kernel-name kns=gpucmp --kernel-name kns=saxpy)
# Runs one program under one tool and writes its error count (or what went wrong) to
# $cells/TOOL.BINARY.N; a cell of the table joins its invocations with " + ".
# GPUCMP_SANITIZE_STOP_AFTER_S: start nothing past this many seconds (a lease's end): the
# cells not reached read "not run".
sanitize_start=$(date +%s)
# case_name BINARY PART: the test case's name (empty for an example), from OUT_DIR/cases.tsv.
case_name() { awk -F'\t' -v b="$1" -v p="$2" '$1 == b && $2 == p {print $3}' "$out_dir/cases.tsv"; }
# program_libraries PROGRAM: the CUDA libraries it loads (their files name the versions) and the tool's version.
program_libraries() {
  local libs
  libs=$(ldd "$1" 2>/dev/null | awk '/lib(cudnn|cublasLt|cublas|nccl|cusparseLt)\.so/ {print $3}' | xargs -r readlink -f |
    xargs -r -n1 basename | sort -u | paste -sd' ')
  echo "${libs:-static} compute-sanitizer ${sanitizer_version:-?}"
}
run_one() {  # tool cell_file log api_errors program args...
  local tool=$1 cell=$2 log=$3 api=$4; shift 4
  local extra=()
  [ "$tool" = memcheck ] && extra=(--leak-check full)
  if [ "$tool" = racecheck ] || [ "$tool" = synccheck ]; then
    [ -n "$barriers" ] && extra=(--num-cuda-barriers "$barriers")
    [ "${GPUCMP_SANITIZE_VENDOR_KERNELS:-0}" = 1 ] || extra+=("${own_kernels[@]}")
  fi
  # GPUCMP_SANITIZE_ARGS: more compute-sanitizer options (space-separated), for a probe.
  # shellcheck disable=SC2206
  [ -n "${GPUCMP_SANITIZE_ARGS:-}" ] && extra+=(${GPUCMP_SANITIZE_ARGS})
  # GPUCMP_SANITIZE_TIMEOUT_S: end one program past this many seconds (its cell says so).
  local limit=()
  [ -n "${GPUCMP_SANITIZE_TIMEOUT_S:-}" ] && limit=(timeout "$GPUCMP_SANITIZE_TIMEOUT_S")
  local t0
  t0=$(date +%s)
  "${limit[@]}" "$sanitizer" --tool "$tool" "${extra[@]}" --error-exitcode 99 --print-limit 20 \
    --report-api-errors="$api" "$@" > "$log" 2>&1
  local rc=$?
  local n
  # racecheck ends with "RACECHECK SUMMARY: N hazards displayed (E errors, W warnings)" ("1 error").
  n=$(sed -n 's/.*ERROR SUMMARY: \([0-9]*\) error.*/\1/p; s/.*RACECHECK SUMMARY: .*(\([0-9]*\) error.*/\1/p' "$log" | tail -1)
  # The tool's own failure ("Internal Sanitizer Error") goes to the vendor table, whatever it
  # counted; racecheck's and synccheck's findings inside a vendor's kernels too (only with
  # GPUCMP_SANITIZE_VENDOR_KERNELS=1 do they look there).
  local vendor_lines="" kind=""
  if grep -q "Internal Sanitizer Error" "$log"; then
    n="tool error (${n:-?} counted)" kind="tool error"
    vendor_lines=$(printf -- '-\t%s' "$(grep -m1 "Internal Sanitizer Error" "$log" | sed 's/^=* *//')")
  elif [[ "$n" =~ ^[0-9]+$ ]] && [ "$n" -gt 0 ] && { [ "$tool" = racecheck ] || [ "$tool" = synccheck ]; }; then
    local sorted
    sorted=$(python3 "$findings_py" "$log" "$n") && n=$(head -1 <<< "$sorted") && vendor_lines=$(tail -n +2 <<< "$sorted")
    kind="vendor kernel"
  fi
  if [ $rc -eq 124 ] && [ -n "${GPUCMP_SANITIZE_TIMEOUT_S:-}" ]; then n="time limit (${GPUCMP_SANITIZE_TIMEOUT_S} s)"
  elif [ -z "$n" ]; then n="crash (exit $rc)"
  elif [ $rc -ne 0 ] && [ $rc -ne 99 ]; then
    # A test binary's own verdict where Catch2 printed one (its exit status is the number of
    # failed assertions, or 2 when no test ran): a failed check is not a crash.
    local failed
    failed=$(grep '^assertions:' "$log" | tail -1 | grep -oE '[0-9]+ failed( [|]|$)' | grep -oE '^[0-9]+')
    if [ -n "$failed" ]; then n="$n, $failed assertions failed"
    elif grep -q "^No tests ran" "$log"; then n="$n, no test ran"
    else n="$n, exit $rc"; fi
  fi
  echo "$n" > "$cell"
  local parts=${cell##*/}
  parts=${parts#"$tool".}
  if [ -n "$vendor_lines" ]; then
    local libs command kernel what
    libs=$(program_libraries "$1")
    command=$(printf '%q ' compute-sanitizer --tool "$tool" "${extra[@]}" "$@")
    while IFS=$'\t' read -r kernel what; do
      printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$tool" "${parts%.*}" "${parts##*.}" "$kind" "$kernel" "$what" "$libs" \
        "${command% }" >> "$out_dir/vendor.tsv"
    done <<< "$vendor_lines"
  fi
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$tool" "${parts%.*}" "${parts##*.}" "$n" "$(( $(date +%s) - t0 ))" \
    "$(case_name "${parts%.*}" "${parts##*.}")" >> "$out_dir/cells.tsv"
}
# Every invocation: tool, binary, part, API errors, program and its arguments, the fields
# apart by $fs and the arguments by $as (test names hold ';' and ','), the longest binaries
# first so that the pool ends together.
fs=$'\x1e' as=$'\x1f'
queue=()
[ $table_only = 1 ] && build_dir=/nonexistent  # nothing to run
# list_cases BINARY FILTER: the names of the test cases FILTER picks, one per line. Catch2 v3's
# XML listing keeps long names on one line; Catch2 v2 lists names alone.
list_cases() {
  local xml
  xml=$("$1" --list-tests --reporter xml "$2" 2>/dev/null)
  if grep -q "<Name>" <<< "$xml"; then
    sed -n 's:.*<Name>\(.*\)</Name>.*:\1:p' <<< "$xml" |
      sed "s/&lt;/</g; s/&gt;/>/g; s/&quot;/\"/g; s/&apos;/'/g; s/&amp;/\&/g"
  else
    "$1" --list-test-names-only "$2" 2>/dev/null | sed '/^$/d'
  fi
}
# case_spec NAME: NAME as a Catch2 test spec that matches it alone (',' '[' ']' '"' and '\'
# escaped).
case_spec() { sed 's/[][\\,"]/\\&/g' <<< "$1"; }
# The part a case's cell is kept under: its name's hash, the same in every call.
case_part() { printf '%s%s' "$1" "$(printf '%s' "$2" | md5sum | cut -c1-10)"; }
: > "$out_dir/cases.tsv"
for t in gpucmp_ops_tests gpucmp_models_tests gpucmp_gpu_tests gpucmp_gbench_tests gpucmp_multigpu_tests; do
  bin="$build_dir/tests/$t"
  [ -x "$bin" ] || continue
  picked "$t" "${GPUCMP_SANITIZE_PROGRAMS:-}" || continue
  # Test cases that provoke a CUDA API error on purpose run with API errors not reported.
  for kind in c a; do
    filter="[gpu]~[timing]~[cupti]~[api_error]" api=explicit
    [ $kind = a ] && filter="[gpu][api_error]~[timing]~[cupti]" api=no
    while IFS= read -r name; do
      [ -n "$name" ] || continue
      part=$(case_part $kind "$name")
      picked "$part" "${GPUCMP_SANITIZE_CASES:-}" || continue
      printf '%s\t%s\t%s\n' "$t" "$part" "$name" >> "$out_dir/cases.tsv"
      for tool in "${tools[@]}"; do
        picked "$tool" "${GPUCMP_SANITIZE_TOOLS:-}" || continue
        queue+=("$tool$fs$t$fs$part$fs$api$fs$bin$fs$(case_spec "$name")$as-d${as}yes")
      done
    done < <(list_cases "$bin" "$filter")
  done
done
for e in 09_train_custom_cnn 07_resnet50_table 08_custom_cnn 04_verified_ops 06_concurrency 05_serving_latency \
         03_modes_side_by_side 02_gbench_kernel 01_engine_custom_kernel; do
  bin="$build_dir/examples/$e"
  [ -x "$bin" ] || continue
  picked "$e" "${GPUCMP_SANITIZE_PROGRAMS:-}" || continue
  arg=""
  # Example 7's table at one small batch: the same path (build, verify every layer, time,
  # project, the OOM cell) as its three article batches, a fraction of the work under a tool.
  [ "$e" = 07_resnet50_table ] && arg="fp16${as}2"
  # Example 2's saxpy at its smallest size, for at most 2 s a row: every size runs the same
  # kernel, and racecheck ran past 60 s on the full range (14 ms a sample at 64 Ki elements,
  # 730 ms at 16 Mi; results/h200/reliability/sanitizer-cells/2026-12-05.tsv).
  [ "$e" = 02_gbench_kernel ] && arg="--benchmark_filter=/65536/${as}--gpucmp_max_time_s=2"
  for tool in "${tools[@]}"; do
    picked "$tool" "${GPUCMP_SANITIZE_TOOLS:-}" && queue+=("$tool$fs$e${fs}1${fs}explicit$fs$bin$fs$arg")
  done
done
[ $table_only = 1 ] || : > "$out_dir/cells.tsv"
# Every log and cell so far, packed into OUT_DIR/sanitize.tgz whenever a program ends: a device
# call cut short returns its files one by one only up to a few, and the logs are where the
# errors are.
pack_logs() {
  [ $table_only = 1 ] && return 0
  tar -C "$out_dir" --exclude=sanitize.tgz --exclude=sanitize.tgz.part --warning=no-file-changed \
    -czf "$out_dir/sanitize.tgz.part" . 2> /dev/null
  mv -f "$out_dir/sanitize.tgz.part" "$out_dir/sanitize.tgz"
}
stopped=0
for item in ${queue[@]+"${queue[@]}"}; do
  IFS=$fs read -r tool name part api bin arg <<< "$item"
  # Wait for a free slot first: the stop time applies when a program would start.
  [ $stopped = 1 ] || while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; pack_logs; done
  if [ -n "${GPUCMP_SANITIZE_STOP_AFTER_S:-}" ] && [ $(( $(date +%s) - sanitize_start )) -gt "$GPUCMP_SANITIZE_STOP_AFTER_S" ]; then
    stopped=1
  fi
  if [ $stopped = 1 ]; then  # a cell that says so, so that a later call knows what is left
    echo "not run" > "$cells/$tool.$name.$part"
    printf '%s\t%s\t%s\t%s\t0\t%s\n' "$tool" "$name" "$part" "not run" "$(case_name "$name" "$part")" \
      >> "$out_dir/cells.tsv"
    continue
  fi
  log="$out_dir/${tool}_${name}_${part}.log"
  args=("$bin")
  [ -n "$arg" ] && { IFS=$as read -r -a more <<< "$arg"; args+=("${more[@]}"); }
  run_one "$tool" "$cells/$tool.$name.$part" "$log" "$api" "${args[@]}" &
done
wait
cell_of() {  # tool binary -> "0", "0 (14 runs)", "0 (12 runs) + time limit (110 s) x2", "not run"
  local f sum=0 numeric=0 v others="" n
  declare -A count=()
  for f in "$cells/$1.$2".*; do
    [ -e "$f" ] || continue
    v=$(cat "$f")
    if [[ "$v" =~ ^[0-9]+$ ]]; then sum=$((sum + v)); numeric=$((numeric + 1))
    else count[$v]=$(( ${count[$v]:-0} + 1 )); fi
  done
  while IFS= read -r v; do
    [ -n "$v" ] || continue
    n=${count[$v]}
    others="${others:+$others + }$v$([ "$n" -gt 1 ] && echo " x$n")"
  done < <(printf '%s\n' "${!count[@]}" | sort)
  if [ $numeric -eq 0 ] && [ -z "$others" ]; then echo "not run"; return; fi
  local sums=""
  [ $numeric -eq 1 ] && sums=$sum
  [ $numeric -gt 1 ] && sums="$sum ($numeric runs)"
  echo "${sums}${sums:+${others:+ + }}${others}"
}
tool_errors=0
for f in "$cells"/*; do
  [ -e "$f" ] || continue
  case "$(cat "$f")" in
    0) ;;
    "tool error"*) tool_errors=$((tool_errors + 1)) ;;  # the vendor table's, neither a pass nor a fail
    *) status=1 ;;
  esac
done
{
  echo "| binary | memcheck | racecheck | synccheck | initcheck |"
  echo "|---|---|---|---|---|"
  for b in "${tests[@]}" "${examples[@]}"; do
    line="| $b |"
    for tool in "${tools[@]}"; do
      cell=$(cell_of "$tool" "$b")
      [ "$cell" = "not run" ] && status=1
      line+=" $cell |"
    done
    echo "$line"
  done
} > "$out_dir/sanitizers.md"
python3 "$findings_py" --table "$out_dir/vendor.md" "$cells" ${vendor_sources[@]+"${vendor_sources[@]}"} || status=1
pack_logs
cat "$out_dir/sanitizers.md"
[ "$tool_errors" -eq 0 ] || echo "sanitize: $tool_errors runs ended in the tool's own error (vendor.md; not counted)"
echo "sanitize: $([ $status -eq 0 ] && echo "0 errors" || echo "ERRORS (logs in $out_dir)")"
exit $status
