#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz) with clang and runs each one over its seed corpus
# (tests/fuzz/corpus/TARGET, which holds every input that once crashed, too).
#   scripts/fuzz.sh [--seconds N | --runs N] [--max-len BYTES] [--jobs N] [--out FILE.md] [--record DIR] [TARGET...]
# --seconds N: each target fuzzes for N seconds (CI: 20); --runs N: for N executions; --jobs N:
# N targets at once (CI: one per core).
# Ends with a table of target, executions, seconds and crashes; --out writes it as markdown,
# --record writes DIR/fuzz_TARGET.json with the tree's commit and the date (scripts/fuzz_record.py;
# results/fuzz/ holds the long runs' records, which the reliability acceptance reads).
# A crash leaves its input in build-fuzz/crashes/TARGET/ and makes the script fail.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
fuzz_build=${BUILD_DIR_FUZZ:-$repo_root/build-fuzz}
limit=(-max_total_time=20)
max_len=()
out=""
record=""
jobs=1
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) limit=(-max_total_time="$2"); shift 2 ;;
    --runs) limit=(-runs="$2"); shift 2 ;;
    --out) out=$2; shift 2 ;;
    --record) record=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --max-len) max_len=(-max_len="$2"); shift 2 ;;
    -*) echo "fuzz.sh: unknown option $1" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
[ ${#targets[@]} -gt 0 ] || targets=(json safetensors report_loader flags)

GPUCMP_INSTALL_FUZZ=1 "$repo_root/scripts/install-deps.sh" >/dev/null
cmake -S "$repo_root/tests/fuzz" -B "$fuzz_build" -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$fuzz_build" --parallel "$(nproc)"

# One target: its run, its log and its exit status (DIR/TARGET.rc), so targets can run at once.
run_target() {
  local t=$1 work="$fuzz_build/corpus/$1" crashes="$fuzz_build/crashes/$1" rc=0
  mkdir -p "$work" "$crashes"
  # Seeds are read, never written; new inputs go to the working corpus.
  "$fuzz_build/fuzz_$t" "${limit[@]}" "${max_len[@]}" -print_final_stats=1 -artifact_prefix="$crashes/" \
    "$work" "$repo_root/tests/fuzz/corpus/$t" > "$fuzz_build/$t.log" 2>&1 || rc=$?
  echo "$rc" > "$fuzz_build/$t.rc"
}
for t in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
  run_target "$t" &
done
wait

table="| target | executions | seconds | crashes |
|---|---|---|---|"
status=0
for t in "${targets[@]}"; do
  log="$fuzz_build/$t.log"
  rc=$(cat "$fuzz_build/$t.rc" 2>/dev/null || echo 1)
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  secs=$(sed -n 's/.*Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$log" | tail -1)
  found=$(find "$fuzz_build/crashes/$t" -type f | wc -l)
  if [ "$rc" -ne 0 ] || [ "$found" -gt 0 ]; then
    status=1
    echo "fuzz.sh: fuzz_$t failed (exit $rc); its log:" >&2
    tail -40 "$log" >&2
  fi
  table+="
| fuzz_$t | ${runs:-?} | ${secs:-?} | $found |"
done
echo "$table"
[ -n "$out" ] && echo "$table" > "$out"
if [ -n "$record" ]; then
  commit=$(git -C "$repo_root" rev-parse --short HEAD 2>/dev/null || echo unknown)
  [ -z "$(git -C "$repo_root" status --porcelain -- include tools tests/fuzz 2>/dev/null)" ] || commit="$commit+uncommitted"
  max=${max_len[0]:-}
  echo "$table" > "$fuzz_build/table.md"
  python3 "$repo_root/scripts/fuzz_record.py" "$fuzz_build/table.md" "$commit" "$(date -u +%F)" "${max#-max_len=}" "$record"
fi
exit $status
