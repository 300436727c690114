#!/usr/bin/env bash
# On a GPU machine: the architecture issue's GPU rows after a change to the operation
# contract or the search (ops/operation.hpp, ops/algorithm_search.hpp): builds for the local
# GPU, then runs the parts named (default all):
#   tests     every [gpu] test binary and example through CTest (labels gpu, example)
#   ops       the operations against PyTorch (scripts/peers/run-ops-comparison.sh), one part
#             at a time (GPUCMP_CONTRACT_OPS_PARTS, default "gemm deepbench conv copy"), the
#             compared rows only (GPUCMP_COMPARISON_EXTRAS=1 adds round 1's other rows)
#   resnet50  ResNet-50 inference against PyTorch (scripts/peers/run-resnet50-comparison.sh)
#   spin      the spin-kernel table of the timing methods (benchmarks/spin_table)
#   spin_before  the same table from the code before the change and from this tree, on this
#             GPU, alternating (GPUCMP_SPIN_ROUNDS rounds, default 2; round N's files in
#             spin_before_N/ and spin_after_N/): the committed table came from another H200,
#             and the noise rule holds within one machine. GPUCMP_SPIN_BEFORE_TREE names the
#             older sources (a folder the call carries), built in their own build/ there; then
#             architecture.py --spin spin_after_1/spin_table.json,spin_after_2/... --spin-before
#             spin_before_1/spin_table.json,spin_before_2/... (each cell the median of its rounds)
# and packs every output into OUT_DIR/contract.tgz (one file, for a device call's return).
#   lab/runs/contract-check.sh OUT_DIR [PARTS]
# lab/acceptance/architecture.py then compares the ratios with the committed ones.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/common.sh"
out_dir=${1:?usage: contract-check.sh OUT_DIR [tests,ops,resnet50,spin,spin_before]}
parts=${2:-tests,ops,resnet50,spin}
mkdir -p "$out_dir/contract"
work="$out_dir/contract"
part() { [[ ",$parts," == *",$1,"* ]]; }
gpucmp_local_architecture
status=0
started=$(date +%s)
# After each part: its time, and everything so far packed (a call cut short still returns it).
stamp() { echo "$1: $(( $(date +%s) - started )) s"; tar -C "$out_dir" -czf "$out_dir/contract.tgz" contract; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,power.limit,temperature.gpu --format=csv > "$work/gpu.csv"
"$repo_root/scripts/install-deps.sh" > "$work/deps.log" 2>&1
# GPUCMP_CONTRACT_TARGETS (space-separated) builds only those targets, when device time is short.
targets=()
[ -n "${GPUCMP_CONTRACT_TARGETS:-}" ] && read -r -a targets <<< "$GPUCMP_CONTRACT_TARGETS" && targets=(--target "${targets[@]}")
{ gpucmp_configure && gpucmp_build "${targets[@]}"; } > "$work/build.log" 2>&1 || { tail -40 "$work/build.log"; exit 1; }
stamp build
if part tests; then
  (cd "$build_dir" && ctest --output-on-failure --no-tests=error -L 'gpu|example' --output-junit "$work/ctest.xml") \
    > "$work/ctest.log" 2>&1 || status=1
  stamp tests
fi
# The ops comparison one part at a time (GPUCMP_CONTRACT_OPS_PARTS, default all four), each
# with its own table, so a device call cut short keeps the parts it finished.
if part ops; then
  for p in ${GPUCMP_CONTRACT_OPS_PARTS:-gemm deepbench conv copy}; do
    GPUCMP_COMPARISON_PARTS=$p GPUCMP_COMPARISON_EXTRAS=${GPUCMP_COMPARISON_EXTRAS:-0} \
      "$repo_root/scripts/peers/run-ops-comparison.sh" "$build_dir" "$work/ops_$p" \
      > "$work/ops_$p.log" 2>&1 || status=1
    stamp "ops $p"
  done
  # The convolution rows with every candidate's time, for acceptance.py --conv.
  if [ -f "$work/ops_conv/conv_1.json" ]; then
    python3 "$repo_root/lab/acceptance/conv-rows.py" "$work/ops_conv/conv_1.json" "$work/conv_rows.json" \
      "$work/ops_conv/search_log.jsonl" > "$work/conv_rows.log" 2>&1 || status=1
  fi
fi
if part resnet50; then
  "$repo_root/scripts/peers/run-resnet50-comparison.sh" "$build_dir" "$work/resnet50" > "$work/resnet50.log" 2>&1 || status=1
  stamp resnet50
fi
if part spin; then
  mkdir -p "$work/spin"
  "$build_dir/benchmarks/spin_table" --out "$work/spin" > "$work/spin.log" 2>&1 || status=1
  stamp spin
fi
if part spin_before; then
  before=${GPUCMP_SPIN_BEFORE_TREE:?contract-check: spin_before needs GPUCMP_SPIN_BEFORE_TREE, the older sources}
  before=$(cd "$before" && pwd)
  # The older tree's own scripts configure and build it (its options as they were then).
  if (cd "$before" && BUILD_DIR="$before/build" bash -c 'source scripts/common.sh && gpucmp_configure && gpucmp_build --target spin_table') \
      > "$work/spin_before_build.log" 2>&1; then
    # Before, then after, each round: neither side always runs on a warmer GPU.
    for round in $(seq "${GPUCMP_SPIN_ROUNDS:-2}"); do
      for side in before after; do
        mkdir -p "$work/spin_${side}_$round"
        bin="$build_dir/benchmarks/spin_table"
        [ $side = before ] && bin="$before/build/benchmarks/spin_table"
        "$bin" --out "$work/spin_${side}_$round" > "$work/spin_${side}_$round.log" 2>&1 || status=1
      done
    done
  else
    echo "contract-check: the older tree's spin_table did not build"; tail -20 "$work/spin_before_build.log"; status=1
  fi
  stamp spin_before
fi
# A short table last.
if part tests; then echo "== ctest"; grep -E "tests passed|\(Failed\)|Not Run|Timeout" "$work/ctest.log"; fi
if part ops; then
  echo "== ops vs PyTorch"
  for f in "$work"/ops_*.log; do grep "took" "$f"; done
  cat "$work"/ops_*/ops_vs_pytorch.md 2>/dev/null | grep -E "^## |Geometric mean"
fi
if part resnet50; then echo "== ResNet-50 vs PyTorch (graph)"; grep -E "\| graph \|" "$work/resnet50/resnet50_vs_pytorch.md"; fi
if part spin; then echo "== spin table"; cat "$work/spin/spin_table.md" 2>/dev/null | head -12; fi
if part spin_before; then
  for f in "$work"/spin_before_*/spin_table.md "$work"/spin_after_*/spin_table.md; do
    [ -f "$f" ] && { echo "== ${f#"$work"/}"; grep -E "^\| (nominal us|2) \|" "$f" | head -2; }
  done
fi
exit $status
