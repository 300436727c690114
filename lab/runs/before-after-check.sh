#!/usr/bin/env bash
# On a GPU machine: the before/after comparison calibrated on the GPU itself. Builds the bundled
# suite (benchmarks/suite.cu) and gpucmp-report, and a copy of the tree whose spin kernel runs
# 5 % longer; then runs the suite twice back to back (first, again) and the slowed build once,
# and compares each with the first run:
#   again against first: two runs of one binary, every row should be SAME (none SLOWER)
#   slowed against first: the spin rows should be SLOWER, the others SAME
# Writes OUT_DIR/before-after/{first,again,slowed}.json, the two comparisons (.md, .csv, exit
# status), summary.json (the counts lab/acceptance/first-hour.json reads) and run.json, packed
# into OUT_DIR/before-after.tgz after each step.
#   lab/runs/before-after-check.sh OUT_DIR [--compare-only]
# GPUCMP_COMMIT: the commit of the tree sent (recorded in run.json). --compare-only compares the
# runs already in OUT_DIR/before-after/ again (after a change of the verdict's statistics), with
# the gpucmp-report of this machine's build, and leaves run.json as it is.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/common.sh"
out_dir=${1:?usage: before-after-check.sh OUT_DIR [--compare-only]}
compare_only=${2:-}
work="$out_dir/before-after"
mkdir -p "$work"
stamp() { echo "$1: $SECONDS s"; [ "$compare_only" = --compare-only ] || tar -C "$out_dir" -czf "$out_dir/before-after.tgz" before-after; }
if [ "$compare_only" != --compare-only ]; then
gpucmp_local_architecture
commit=$(gpucmp_tree_commit)
printf '{"commit": "%s", "date": "%s", "gpu_uuid": "%s"}\n' "$commit" "$(date -u +%F)" \
  "$(nvidia-smi --query-gpu=uuid --format=csv,noheader | head -1)" > "$work/run.json"

export GPUCMP_EXTRA_CMAKE_ARGS="${GPUCMP_EXTRA_CMAKE_ARGS:-} -DGPUCMP_BUILD_BENCHMARKS=ON -DGPUCMP_BUILD_TOOLS=ON"
{ gpucmp_configure && gpucmp_build --target suite gpucmp-report; } > "$work/build.log" 2>&1 || { tail -40 "$work/build.log"; exit 1; }

# The slowed copy: the same sources but for the spin kernel's duration, built on its own.
slowed_src="$out_dir/slowed-src"
rm -rf "$slowed_src" && mkdir -p "$slowed_src"
tar -C "$repo_root" --exclude=./build --exclude='./build-*' --exclude=./.git --exclude=./.deps --exclude=./.before -cf - . |
  tar -C "$slowed_src" -xf -
spin="$slowed_src/include/gpucmp/kernels/spin.cuh"
sed -i 's/seconds \* 1e9 + 0.5/seconds * 1.05e9 + 0.5/' "$spin"
grep -q '1.05e9' "$spin" || { echo "before-after-check: the spin kernel's duration was not found in $spin" >&2; exit 1; }
{ BUILD_DIR="$slowed_src/build" bash -c "source '$slowed_src/scripts/common.sh' && gpucmp_configure && gpucmp_build --target suite"; } \
  > "$work/build_slowed.log" 2>&1 || { tail -40 "$work/build_slowed.log"; exit 1; }
stamp build

run_suite() {  # binary, name
  "$1" --benchmark_out="$work/$2.json" --benchmark_out_format=json > "$work/$2.log" 2>&1
  echo "$?" > "$work/$2.exit"
  stamp "$2"
}
run_suite "$build_dir/benchmarks/suite" first
run_suite "$build_dir/benchmarks/suite" again
run_suite "$slowed_src/build/benchmarks/suite" slowed
fi

report="$build_dir/tools/report/gpucmp-report"
for b in again slowed; do
  "$report" compare --label first="$work/first.json" --label "$b=$work/$b.json" \
    --markdown "$work/${b}_vs_first.md" --csv "$work/${b}_vs_first.csv" 2> "$work/${b}_vs_first.log"
  echo "$?" > "$work/${b}_vs_first.exit"
done
python3 - "$work" > "$work/summary.json" <<'PY'
import csv, json, os, sys
work = sys.argv[1]
def verdicts(name):
    return list(csv.DictReader(open(os.path.join(work, name + "_vs_first.csv"), encoding="utf-8")))
def exit_of(name):
    return int(open(os.path.join(work, name + "_vs_first.exit")).read())
aa, slowed = verdicts("again"), verdicts("slowed")
count = lambda rows, v: sum(r["verdict"] == v for r in rows)
spin = [r for r in slowed if r["benchmark"].startswith("spin/")]
other = [r for r in slowed if not r["benchmark"].startswith("spin/")]
print(json.dumps({
    "a_a": {"rows": len(aa), "same": count(aa, "SAME"), "slower": count(aa, "SLOWER"), "faster": count(aa, "FASTER"),
            "uncertain": count(aa, "UNCERTAIN"), "same_share": count(aa, "SAME") / max(len(aa), 1),
            "exit_status": exit_of("again")},
    "slowed": {"spin_rows": len(spin), "spin_slower": count(spin, "SLOWER"),
               "spin_ratios": [float(r["ratio"] or "nan") for r in spin],
               "other_rows": len(other), "other_slower": count(other, "SLOWER"), "exit_status": exit_of("slowed")},
}, indent=1))
PY
stamp compare
cat "$work/summary.json"
