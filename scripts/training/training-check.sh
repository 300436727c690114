#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: gpucmp contributors
# On a GPU machine: the training issue's GPU work in as few device calls as possible. Builds
# only the training targets for the local GPU, then runs the parts named (default all; the
# tests last, since their build is the slowest):
#   tests       the [gpu] tests of the training layers and step (gpucmp_models_tests
#               "[training]"), ResNet-18's, the convolution bindings and accumulating passes
#               (gpucmp_ops_tests), and
#               data-parallel training and the collectives (gpucmp_multigpu_tests, all)
#   verify      scripts/training/run-training-comparison.sh's verify part (PyTorch autograd)
#   example     examples/09_train_custom_cnn
#   throughput  gpucmp's training benchmark and PyTorch's, side by side (run-training-comparison.sh;
#               GPUCMP_TRAINING_PRECISIONS=amp_fp16 etc. runs one precision per call)
#   largest     the largest AMP FP16 batch
#   statistics  the step with the batch norms' statistics off and always from the convolutions
#               (throughput's rows have the default, searched per layer)
#   alternate   AMP FP16 gpucmp / PyTorch in alternating pairs (GPUCMP_ALTERNATE_PAIRS)
#   acceptance  lab/acceptance/training.py over what the parts left
# and packs every output into OUT_DIR/training.tgz after each part (a call cut short still
# returns what it finished).
#   scripts/training/training-check.sh OUT_DIR [PARTS]
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../common.sh"
out_dir=${1:?usage: training-check.sh OUT_DIR [tests,verify,example,throughput,alternate,largest,acceptance]}
parts=${2:-tests,verify,example,throughput,alternate,largest,acceptance}
work="$out_dir/training"
mkdir -p "$work"
part() { [[ ",$parts," == *",$1,"* ]]; }
gpucmp_local_architecture
status=0
started=$(date +%s)
stamp() { echo "$1: $(( $(date +%s) - started )) s"; tar -C "$out_dir" -czf "$out_dir/training.tgz" training; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,power.limit,temperature.gpu --format=csv > "$work/gpu.csv"
"$repo_root/scripts/install-deps.sh" > "$work/deps.log" 2>&1
# The programs first and the tests last, apart: on the H200 (2026-12-02) the test build once
# ran past two calls while the programs were ready, so no part waits on the tests.
programs=(training training_dump 09_train_custom_cnn gpucmp-report)
{ gpucmp_configure && gpucmp_build --target "${programs[@]}"; } > "$work/build.log" 2>&1 || { tail -40 "$work/build.log"; exit 1; }
stamp build
for p in throughput alternate statistics verify example largest acceptance; do  # the timing first: a call cut short keeps it
  part "$p" || continue
  "$repo_root/scripts/training/run-training-comparison.sh" "$build_dir" "$work" "$p" > "$work/$p.log" 2>&1 || status=1
  stamp "$p"
done
# The tests last: their build is the slowest part (see above).
if part tests; then
  # Bounded, and watched: what is still compiling after 150 s, and every step's time.
  ( sleep 150; ps -eo pid,etime,args | grep -E "cicc|ptxas|cc1plus|cudafe|nvcc|fatbinary|ld|gpucmp_" | grep -v grep \
      > "$work/build_tests_after_150s.txt" ) &
  watchdog=$!
  tests=(gpucmp_models_tests gpucmp_ops_tests)
  # The multi-GPU tests exist where the build found NCCL (gpucmp::nccl).
  ninja -C "$build_dir" -t targets all | grep -q "^gpucmp_multigpu_tests:" && tests+=(gpucmp_multigpu_tests)
  NINJA_STATUS="[%f/%t %es] " timeout "${GPUCMP_TEST_BUILD_TIMEOUT:-300}" ninja -C "$build_dir" "${tests[@]}" \
    > "$work/build_tests.log" 2>&1 ||
    { echo "training-check: the test build failed or ran past its limit"; tail -5 "$work/build_tests.log"; status=1; }
  kill "$watchdog" 2>/dev/null
  cp "$build_dir/.ninja_log" "$work/ninja_log.txt" 2>/dev/null
  stamp build_tests
  "$build_dir/tests/gpucmp_models_tests" "[training],[resnet18]" --durations yes > "$work/tests_training.log" 2>&1 || status=1
  "$build_dir/tests/gpucmp_ops_tests" "a searched convolution bound to other tensors*,an accumulating pass*,a forward pass with batch norm's statistics*" > "$work/tests_conv_binding.log" 2>&1 || status=1
  if [ -x "$build_dir/tests/gpucmp_multigpu_tests" ]; then
    "$build_dir/tests/gpucmp_multigpu_tests" --durations yes > "$work/tests_multigpu.log" 2>&1 || status=1
  fi
  stamp tests
fi
# A short table last.
if part tests; then
  echo "== training tests"; grep -E "test cases|assertions|FAILED|failed" "$work/tests_training.log" | tail -8
  echo "== conv bindings"; tail -3 "$work/tests_conv_binding.log"
  [ -f "$work/tests_multigpu.log" ] && { echo "== data-parallel and collectives"; grep -E "test cases|assertions|FAILED" "$work/tests_multigpu.log" | tail -6; }
fi
part verify && { echo "== vs PyTorch autograd"; grep -E "^resnet50|vs fp64|bounds|verdict" "$work/verify.log"; }
part example && { echo "== example 09"; grep loss "$work/example.txt"; }
part throughput && { echo "== throughput"; cat "$work"/gpucmp_training_*.txt | grep -E "^train/.*(graph|eager)" | cut -c1-150; cat "$work"/torch_training_*.log | grep "img/s"; }
part alternate && { echo "== alternating pairs"; for d in "$work"/alternate/pair*; do echo "$(basename "$d")";
  grep -E "^train/.*graph|ERROR" "$d/gpucmp_training_amp_fp16.txt" | cut -c1-90; grep "img/s" "$d/torch_training_amp_fp16.log"; done; }
part statistics && { echo "== batch norm statistics off, then always from the convolutions";
  for f in "$work"/statistics_*_amp_fp16.txt; do echo "$(basename "$f")"; grep -E "^train/.*graph|ERROR" "$f" | cut -c1-110; done; }
part largest && grep "largest batch" "$work/largest_batch.txt"
part acceptance && cat "$work/summary.md" 2>/dev/null
echo "training-check: $([ $status -eq 0 ] && echo PASSED || echo FAILED)"
exit $status
