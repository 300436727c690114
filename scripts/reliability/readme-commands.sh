#!/usr/bin/env bash
# The README's two commands on a fresh clone of HEAD, in the README's order, repeated, and
# with the benchmark script run between two test runs (the order that once ran no test).
# Writes OUT_FILE: one line per run-tests.sh invocation, "order<TAB>passed<TAB>total", for
# lab/acceptance/reliability_measures.py. Run it on a machine like CI's.
#   scripts/reliability/readme-commands.sh OUT_FILE
set -euo pipefail
out=${1:?usage: readme-commands.sh OUT_FILE}
out=$(realpath -m "$out")
repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
clone=$(mktemp -d)/gpucmp
git clone -q "$repo_root" "$clone"
# The clone sits where ../shared would be missing; the scripts do not need it.
cd "$clone"
printf '# order\tpassed\ttotal (scripts/reliability/readme-commands.sh, %s, %s)\n' "$(git rev-parse --short HEAD)" \
  "$(date -u +%Y-%m-%d)" > "$out"
tests() {  # label
  local log
  log=$(mktemp)
  scripts/run-tests.sh > "$log" 2>&1 || true
  local counts
  counts=$(sed -n 's/.*tests passed, \([0-9]*\) tests failed out of \([0-9]*\)$/\1 \2/p' "$log" | tail -1)
  local failed=${counts%% *} total=${counts##* }
  [ -n "$counts" ] || { failed=0; total=0; tail -20 "$log" >&2; }
  printf '%s\t%s\t%s\n' "$1" "$(( total - failed ))" "$total" >> "$out"
  echo "readme-commands: $1: $(( total - failed )) of $total passed"
}
scripts/run-benchmarks.sh > /dev/null 2>&1
tests "run-benchmarks.sh then run-tests.sh"
tests "run-tests.sh repeated"
scripts/run-benchmarks.sh > /dev/null 2>&1
tests "run-tests.sh after run-benchmarks.sh again"
rm -rf "$(dirname "$clone")"
