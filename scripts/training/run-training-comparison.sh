#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: gpucmp contributors
# The training issue's side-by-side run on one GPU, in parts (each fits one device call):
#   throughput  per precision (AMP FP16, BF16, TF32; each its own files, so precisions can
#               run in separate calls): gpucmp's training benchmark at batches 64, 128, 256,
#               eager and graph, then torch_training.py on the same precision and batches,
#               gpucmp on PyTorch's own cuDNN and cuBLASLt
#   verify      training_dump + compare_pytorch.py for FP32, AMP FP16, TF32 and BF16 (ResNet-50,
#               batch 16, 50 steps): gradients, weights after one step, loss curves; at random
#               init and from the zero-init residual start
#   example     examples/09_train_custom_cnn: a user's CNN learns a teacher's labels
#   largest     the largest AMP FP16 batch that fits, built and verified
#   statistics  where the batch norms' statistics come from, A/B: gpucmp's AMP FP16 step with
#               --statistics_in_conv=off and =always, beside throughput's rows (searched, the
#               default), each with its layers and step parts (GPUCMP_STATISTICS_MODES, default
#               "off always"; GPUCMP_STATISTICS_BATCHES, default 256)
#   alternate   AMP FP16, gpucmp and PyTorch AMP eager in GPUCMP_ALTERNATE_PAIRS pairs (default
#               3), one process each, the side that goes first alternating from pair to pair:
#               PyTorch's rate moved 5,600-5,991 img/s between calls on the H200, so one pair
#               is one sample; acceptance.py takes the median pair's ratio (OUT_DIR/alternate/)
#   acceptance  lab/acceptance/training.py over what the parts left in OUT_DIR, with
#               gpucmp-report's projections onto the A100, L20 and L40S
#   scripts/training/run-training-comparison.sh BUILD_DIR OUT_DIR [PARTS] (default: all, in that order)
# GPUCMP_TRAINING_BATCHES (default 64,128,256), GPUCMP_TRAINING_PRECISIONS (amp_fp16,bf16,tf32).
set -uo pipefail
build_dir=${1:?usage: run-training-comparison.sh BUILD_DIR OUT_DIR [PARTS]}
out_dir=${2:?usage: run-training-comparison.sh BUILD_DIR OUT_DIR [PARTS]}
parts=${3:-throughput,alternate,verify,example,largest,acceptance}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
mkdir -p "$out_dir"
status=0
batches=${GPUCMP_TRAINING_BATCHES:-64,128,256}
precisions=${GPUCMP_TRAINING_PRECISIONS:-amp_fp16,bf16,tf32}
stamp() { echo "[$(date +%T)] run-training-comparison: $*"; }

has_part() { [[ ",$parts," == *",$1,"* ]]; }

if has_part throughput || has_part alternate || has_part statistics || has_part verify || has_part largest; then
  source "$root/scripts/peers/same-libraries.sh"
fi

if has_part throughput; then
  # One precision at a time, each with its own files, so parts can run in separate calls.
  for precision in ${precisions//,/ }; do
    case $precision in
      amp_fp16) modes=amp_fp16/eager ;;
      bf16) modes=bf16/eager,bf16/graph ;;
      tf32) modes=tf32/eager,tf32/graph ;;
      *) modes="" ;;
    esac
    stamp "gpucmp training $precision at $batches"
    "$build_dir/benchmarks/training" --precisions="$precision" --batches="$batches" --layers_out="$out_dir/layers_$precision.md" \
      --benchmark_out="$out_dir/gpucmp_training_$precision.json" --benchmark_out_format=json > "$out_dir/gpucmp_training_$precision.txt" 2>&1 ||
      { echo "run-training-comparison: training $precision failed"; tail -20 "$out_dir/gpucmp_training_$precision.txt"; status=1; }
    # The step's time by part, without the per-layer rows (the layers file runs to 100s of KB).
    python3 "$here/step_parts.py" "$out_dir/layers_$precision.md" > "$out_dir/step_parts_$precision.md" || status=1
    if [ -n "$modes" ]; then
      stamp "PyTorch training $modes"
      (cd "$here" && python3 torch_training.py --out "$out_dir/torch_training_$precision.json" --batches "$batches" --modes "$modes") \
        > "$out_dir/torch_training_$precision.log" 2>&1 ||
        { echo "run-training-comparison: torch_training.py failed"; tail -20 "$out_dir/torch_training_$precision.log"; status=1; }
    fi
  done
fi

if has_part verify; then
  # Two runs per precision: the benchmark's network at random initialisation (held to PyTorch's
  # own accuracy: a deep network at random init amplifies rounding in any implementation), and
  # the well-conditioned zero-init residual start at learning rate 0.01 (held to the bounds;
  # the loss stays well above 0 over the 50 steps, where its relative error means something).
  # GPUCMP_VERIFY_RUNS (default "random conditioned") picks runs, when device time is short.
  for precision in fp32 amp_fp16 tf32 bf16; do
    for run in ${GPUCMP_VERIFY_RUNS:-random conditioned}; do
      name=$precision; args=(); verdict=()
      if [ $run = conditioned ]; then
        name=${precision}_conditioned; args=(--residual_gamma=0 --learning_rate=0.01)
        # The issue's bounds hold FP32 and AMP FP16; TF32's and BF16's are documented, measured.
        case $precision in fp32|amp_fp16) verdict=(--require-bounds) ;; esac
      fi
      stamp "verify $name against PyTorch autograd"
      dump="$out_dir/dump_$name"
      mkdir -p "$dump"
      if "$build_dir/benchmarks/training_dump" --out="$dump" --precision="$precision" --batch=16 --steps=50 "${args[@]}" > "$dump/dump.log" 2>&1; then
        python3 "$here/compare_pytorch.py" "$dump" --out "$out_dir/verify_$name.json" "${verdict[@]}" > "$out_dir/verify_$name.txt" 2>&1 || status=1
        cat "$out_dir/verify_$name.txt"
      else
        echo "run-training-comparison: training_dump $name failed"; tail -20 "$dump/dump.log"; status=1
      fi
      rm -f "$dump"/*.safetensors  # large; the comparison's JSON keeps what counts
    done
  done
fi

if has_part example; then
  stamp "user network example"
  "$build_dir/examples/09_train_custom_cnn" --loss_out="$out_dir/example_losses.json" \
    > "$out_dir/example.txt" 2>&1 || { echo "run-training-comparison: the example failed"; tail -20 "$out_dir/example.txt"; status=1; }
fi

if has_part alternate; then
  for pair in $(seq "${GPUCMP_ALTERNATE_PAIRS:-3}"); do
    dir="$out_dir/alternate/pair$pair"
    mkdir -p "$dir"
    sides=(gpucmp torch)
    [ $((pair % 2)) = 0 ] && sides=(torch gpucmp)  # who goes first alternates: no side always runs on a warmer GPU
    for side in "${sides[@]}"; do
      stamp "pair $pair: $side AMP FP16 at $batches"
      if [ $side = gpucmp ]; then
        "$build_dir/benchmarks/training" --precisions=amp_fp16 --batches="$batches" --benchmark_out="$dir/gpucmp_training_amp_fp16.json" \
          --benchmark_out_format=json > "$dir/gpucmp_training_amp_fp16.txt" 2>&1 ||
          { echo "run-training-comparison: pair $pair, gpucmp failed"; tail -20 "$dir/gpucmp_training_amp_fp16.txt"; status=1; }
      else
        (cd "$here" && python3 torch_training.py --out "$dir/torch_training_amp_fp16.json" --batches "$batches" --modes amp_fp16/eager) \
          > "$dir/torch_training_amp_fp16.log" 2>&1 ||
          { echo "run-training-comparison: pair $pair, torch_training.py failed"; tail -20 "$dir/torch_training_amp_fp16.log"; status=1; }
      fi
    done
  done
fi

if has_part statistics; then
  for mode in ${GPUCMP_STATISTICS_MODES:-off always}; do
    stamp "the AMP FP16 step with --statistics_in_conv=$mode"
    "$build_dir/benchmarks/training" --precisions=amp_fp16 --batches="${GPUCMP_STATISTICS_BATCHES:-256}" --statistics_in_conv=$mode \
      --layers_out="$out_dir/layers_statistics_$mode.md" --benchmark_out="$out_dir/statistics_${mode}_amp_fp16.json" \
      --benchmark_out_format=json > "$out_dir/statistics_${mode}_amp_fp16.txt" 2>&1 ||
      { echo "run-training-comparison: the step with statistics $mode failed"; tail -20 "$out_dir/statistics_${mode}_amp_fp16.txt"; status=1; }
    python3 "$here/step_parts.py" "$out_dir/layers_statistics_$mode.md" > "$out_dir/step_parts_statistics_$mode.md" || status=1
  done
fi

if has_part largest; then
  stamp "largest AMP FP16 batch"
  "$build_dir/benchmarks/training" --precisions=amp_fp16 --only_largest_batch \
    > "$out_dir/largest_batch.txt" 2>&1 || { echo "run-training-comparison: largest batch failed"; status=1; }
  cat "$out_dir/largest_batch.txt" | grep "largest batch" || true
fi

if has_part acceptance; then
  stamp "acceptance"
  results=("$out_dir"/gpucmp_training_*.json)
  if [ -f "${results[0]}" ] && [ -x "$build_dir/tools/report/gpucmp-report" ]; then
    "$build_dir/tools/report/gpucmp-report" compare "${results[@]}" --project a100_80gb_sxm,l20,l40s \
      --csv "$out_dir/projection.csv" --markdown "$out_dir/projection.md" > /dev/null 2>&1 ||
      { echo "run-training-comparison: gpucmp-report failed"; status=1; }
  fi
  python3 "$root/lab/acceptance/training.py" "$root" "$out_dir" || status=1
fi
exit $status
