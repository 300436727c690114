#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: gpucmp contributors
# On a GPU machine: what moving cuDNN onto cudnn-frontend's graph API must show (the
# architecture issue "Ready the house"), in parts, each packed into OUT_DIR/check.tgz as it
# ends (a device call cut short still returns what finished):
#   build           the test binaries and benchmarks the parts below run, for the local GPU
#   conv_tests      gpucmp_ops_tests "[conv]": every pass, API, precision, binding, accumulation
#   conv_compare    the convolution sweep against PyTorch (scripts/peers/run-ops-comparison.sh)
#   models_tests    gpucmp_models_tests "[models]": the fused layers, ResNet-50 and ResNet-18
#   training_tests  gpucmp_models_tests "[training]": the step against its FP64 reference
#   resnet50        ResNet-50 FP16 inference against PyTorch at batches 32 and 256
#   alternate       the AMP FP16 training step at batch 256 against PyTorch, alternating pairs
#   training_ab     the same step before and after the change on this machine, alternating
#                   (GPUCMP_AB_ROUNDS rounds, default 2), each with its time by part (kernel
#                   mode, scripts/training/step_parts.py): GPUCMP_BEFORE_TREE names the older
#                   sources (a folder the call carries, e.g. `git archive 57f8753 | tar -x -C
#                   .before`), built in their own build/ there
#   lab/runs/cudnn-graph-check.sh OUT_DIR [PARTS, comma-separated; default all]
# CUDNN_FRONTEND_ROOT names cudnn-frontend's headers where the machine has no network;
# GPUCMP_CHECK_TARGETS replaces the build part's targets (a call that runs only the timing parts
# need not build the test binaries); GPUCMP_COMMIT the commit of the tree sent (a device machine's copy may carry older git
# metadata): OUT_DIR/check/run.json records it with the date, as lab/acceptance/ reads runs.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/common.sh"
out_dir=${1:?usage: cudnn-graph-check.sh OUT_DIR [PARTS]}
parts=${2:-build,conv_tests,conv_compare,models_tests,training_tests,resnet50,alternate}
work="$out_dir/check"
mkdir -p "$work"
part() { [[ ",$parts," == *",$1,"* ]]; }
gpucmp_local_architecture
status=0
started=$(date +%s)
stamp() { echo "$1: $(( $(date +%s) - started )) s (status $status)"; tar -C "$out_dir" -czf "$out_dir/check.tgz" check; }
commit=$(gpucmp_tree_commit)
printf '{"commit": "%s", "date": "%s", "gpu_uuid": "%s"}\n' "$commit" "$(date -u +%F)" \
  "$(nvidia-smi --query-gpu=uuid --format=csv,noheader | head -1)" > "$work/run.json"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv > "$work/gpu.csv"
if part build; then
  "$repo_root/scripts/install-deps.sh" > "$work/deps.log" 2>&1
  { GPUCMP_EXTRA_CMAKE_ARGS="${GPUCMP_EXTRA_CMAKE_ARGS:-} -DGPUCMP_BUILD_TESTS=ON -DGPUCMP_BUILD_EXAMPLES=ON \
      -DGPUCMP_BUILD_BENCHMARKS=ON -DGPUCMP_BUILD_TOOLS=ON" gpucmp_configure &&
    gpucmp_build --target ${GPUCMP_CHECK_TARGETS:-gpucmp_ops_tests gpucmp_models_tests conv_sweep resnet50 training gpucmp-report}; } \
    > "$work/build.log" 2>&1 || { status=1; tail -30 "$work/build.log"; stamp build; exit 1; }
  stamp build
fi
tests() {  # name, binary, filter
  timeout "${GPUCMP_CHECK_TEST_TIMEOUT:-300}" "$build_dir/tests/$2" "$3" --durations yes > "$work/$1.log" 2>&1 || status=1
  grep -E "test cases|FAILED|failed" "$work/$1.log" | tail -4
  stamp "$1"
}
part conv_tests && tests conv_tests gpucmp_ops_tests "[conv]"
if part conv_compare; then
  GPUCMP_COMPARISON_PARTS=conv GPUCMP_COMPARISON_EXTRAS=0 "$repo_root/scripts/peers/run-ops-comparison.sh" "$build_dir" \
    "$work/ops_conv" > "$work/ops_conv.log" 2>&1 || status=1
  grep -E "^## |Geometric mean" "$work/ops_conv/ops_vs_pytorch.md"
  stamp conv_compare
fi
part models_tests && tests models_tests gpucmp_models_tests "[models]"
part training_tests && tests training_tests gpucmp_models_tests "[training]"
if part resnet50; then
  GPUCMP_RESNET50_DTYPES=fp16 GPUCMP_RESNET50_BATCHES=32,256 "$repo_root/scripts/peers/run-resnet50-comparison.sh" \
    "$build_dir" "$work/resnet50" > "$work/resnet50.log" 2>&1 || status=1
  grep -E "\| graph \|" "$work/resnet50/resnet50_vs_pytorch.md"
  stamp resnet50
fi
if part alternate; then
  GPUCMP_TRAINING_BATCHES=256 GPUCMP_TRAINING_PRECISIONS=amp_fp16 GPUCMP_ALTERNATE_PAIRS=${GPUCMP_ALTERNATE_PAIRS:-3} \
    "$repo_root/scripts/training/run-training-comparison.sh" "$build_dir" "$work/training" alternate \
    > "$work/alternate.log" 2>&1 || status=1
  for d in "$work"/training/alternate/pair*; do
    echo "$(basename "$d"): $(grep -E "^train/.*graph" "$d/gpucmp_training_amp_fp16.txt" | cut -c1-80)"
    grep "img/s" "$d/torch_training_amp_fp16.log"
  done
  stamp alternate
fi
if part training_ab; then
  before=$(cd "${GPUCMP_BEFORE_TREE:?cudnn-graph-check: training_ab needs GPUCMP_BEFORE_TREE, the older sources}" && pwd)
  # The older tree's own scripts configure and build it (its options as they were then).
  if (cd "$before" && BUILD_DIR="$before/build" bash -c 'source scripts/common.sh && gpucmp_configure && gpucmp_build --target training') \
      > "$work/before_build.log" 2>&1; then
    source "$repo_root/scripts/peers/same-libraries.sh"
    for round in $(seq "${GPUCMP_AB_ROUNDS:-2}"); do
      sides=(before after)
      [ $((round % 2)) = 0 ] && sides=(after before)  # neither side always runs on a warmer GPU
      for side in "${sides[@]}"; do
        dir="$work/training_ab/${side}_$round"
        mkdir -p "$dir"
        bin="$build_dir/benchmarks/training"
        [ $side = before ] && bin="$before/build/benchmarks/training"
        "$bin" --precisions=amp_fp16 --batches=256 --layers_out="$dir/layers.md" --benchmark_out="$dir/training.json" \
          --benchmark_out_format=json > "$dir/training.txt" 2>&1 || status=1
        python3 "$repo_root/scripts/training/step_parts.py" "$dir/layers.md" > "$dir/step_parts.md" 2>&1 || status=1
        echo "$side $round: $(grep -E "^train/.*graph" "$dir/training.txt" | cut -c1-90)"
      done
    done
  else
    echo "cudnn-graph-check: the older tree's training benchmark did not build"; tail -20 "$work/before_build.log"; status=1
  fi
  stamp training_ab
fi
echo "cudnn-graph-check: $([ $status -eq 0 ] && echo PASSED || echo FAILED)"
exit $status
