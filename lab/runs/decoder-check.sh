#!/usr/bin/env bash
# On a GPU machine: the Llama-style decoder's runs, in parts, each packed into
# OUT_DIR/decoder.tgz as it ends (a device call cut short still returns what finished):
#   build     gpucmp_models_tests and benchmarks/decoder (its logits mode too)
#   tests     gpucmp_models_tests "[decoder],[decoder_training]" (prefill, decode and a training step
#             against the double references)
#   check     scripts/models/decoder-vs-transformers.py on GPUCMP_DECODER_GEOMETRIES (default:
#             small llama-3.2-1b): the same random weights through safetensors, logits and greedy
#             tokens against transformers in FP32
#   bench     benchmarks/decoder (GPUCMP_DECODER_FLAGS, e.g. --prompts=4096 --batches=1,16
#             --contexts=2048) beside scripts/peers/transformers_decoder.py on the same steps,
#             joined by scripts/peers/compare-decoder.py (ratios and the decode roofline; with
#             --gpucmp_power in the flags, J/token; GPUCMP_USD_PER_HOUR, $ per million tokens)
#   train-check  scripts/models/decoder-training-vs-pytorch.py on the small geometry: the training
#             step's gradients, first AdamW update and 20-step loss curve against PyTorch autograd
#             in FP32, PyTorch AMP beside it as the yardstick (with and without checkpointing)
#   train     benchmarks/decoder train (GPUCMP_TRAIN_FLAGS, e.g. --model=llama-3-8b --scopes=blocks1
#             --batch=8 --sequence=4096 --checkpointing=off,on) beside
#             scripts/peers/torch_decoder_train.py on the same shapes, joined by
#             scripts/peers/compare-decoder-training.py (ratios, MFU, checkpointing's cost and saving)
#   serve     benchmarks/decoder serve (GPUCMP_SERVE_FLAGS, e.g. --slots=64 --prompt=1536
#             --output=512 --requests=128): continuous batching on a paged cache, the goodput
#             search's every rate in serve.json
#   breakdown benchmarks/decoder --breakdown once for each of GPUCMP_BREAKDOWN_VARIANTS, one process
#             after the other (default: --norm_fusion=off --norm_fusion=on; a variant is one flag,
#             and may come again: each process searches its own step plans, which can differ;
#             GPUCMP_BREAKDOWN_FLAGS, default --prompts=128 --batches=1,16 --contexts=2048): graph
#             rows of each (what the variant gains) and each step's kernels by group
#             (scripts/kernel-breakdown.py: where a step's time goes)
#   lab/runs/decoder-check.sh OUT_DIR [PARTS, comma-separated; default build,tests,check,bench]
# CUDNN_FRONTEND_ROOT names cudnn-frontend's headers where the machine has no network;
# GPUCMP_COMMIT the commit of the tree sent (recorded in run.json). Attention runs on the cuDNN
# PyTorch ships (scripts/peers/same-libraries.sh), as the attention runs do.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/common.sh"
out_dir=${1:?usage: decoder-check.sh OUT_DIR [PARTS]}
parts=${2:-build,tests,check,bench}
work="$out_dir/decoder"
mkdir -p "$work"
part() { [[ ",$parts," == *",$1,"* ]]; }
status=0
stamp() { echo "$1: $SECONDS s (status $status)"; tar -C "$out_dir" -czf "$out_dir/decoder.tgz" decoder; }
gpucmp_local_architecture
commit=$(gpucmp_tree_commit)
printf '{"commit": "%s", "date": "%s", "gpu": "%s"}\n' "$commit" "$(date -u +%F)" \
  "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" > "$work/run.json"
if part build; then
  { GPUCMP_EXTRA_CMAKE_ARGS="${GPUCMP_EXTRA_CMAKE_ARGS:-} -DGPUCMP_BUILD_TESTS=ON -DGPUCMP_BUILD_BENCHMARKS=ON" gpucmp_configure &&
    gpucmp_build --target gpucmp_models_tests decoder; } > "$work/build.log" 2>&1 ||
    { status=1; tail -30 "$work/build.log"; stamp build; exit 1; }
  stamp build
fi
source "$repo_root/scripts/peers/same-libraries.sh"
if part tests; then
  timeout "${GPUCMP_CHECK_TEST_TIMEOUT:-300}" "$build_dir/tests/gpucmp_models_tests" "[decoder],[decoder_training]" --durations yes \
    > "$work/test_decoder.log" 2>&1 || status=1
  echo "decoder: $(grep -E "test cases|FAILED" "$work/test_decoder.log" | tail -2 | tr '\n' ' ')"
  stamp tests
fi
if part check; then
  for geometry in ${GPUCMP_DECODER_GEOMETRIES:-small llama-3.2-1b}; do
    timeout "${GPUCMP_DECODER_CHECK_TIMEOUT:-300}" python3 "$repo_root/scripts/models/decoder-vs-transformers.py" \
      "$build_dir" "$work/check_$geometry" --geometry "$geometry" > "$work/check_$geometry.log" 2>&1 || status=1
    tail -3 "$work/check_$geometry.log"
    rm -rf "$work/check_$geometry/checkpoint"  # the weights: large, and rebuilt from the seed
    stamp "check $geometry"
  done
fi
if part bench; then
  # shellcheck disable=SC2086  # the flags are words
  timeout "${GPUCMP_DECODER_TIMEOUT:-500}" "$build_dir/benchmarks/decoder" --gpucmp_max_time_s=1 ${GPUCMP_DECODER_FLAGS:-} \
    --benchmark_out="$work/decoder.json" --benchmark_out_format=json > "$work/bench.log" 2>&1 || status=1
  tail -3 "$work/bench.log"
  prompts=$(sed -n 's/.*--prompts=\([0-9,]*\).*/\1/p' <<< "${GPUCMP_DECODER_FLAGS:-}")
  batches=$(sed -n 's/.*--batches=\([0-9,]*\).*/\1/p' <<< "${GPUCMP_DECODER_FLAGS:-}")
  contexts=$(sed -n 's/.*--contexts=\([0-9,]*\).*/\1/p' <<< "${GPUCMP_DECODER_FLAGS:-}")
  timeout "${GPUCMP_TRANSFORMERS_TIMEOUT:-400}" python3 "$repo_root/scripts/peers/transformers_decoder.py" "$work/transformers.json" \
    ${prompts:+--prompts "$prompts"} ${batches:+--batches "$batches"} ${contexts:+--contexts "$contexts"} \
    > "$work/transformers.log" 2>&1 || status=1
  python3 "$repo_root/scripts/peers/compare-decoder.py" "$work/decoder.json" "$work/transformers.json" \
    ${GPUCMP_USD_PER_HOUR:+--usd-per-hour "$GPUCMP_USD_PER_HOUR"} \
    --out-json "$work/decoder_vs_transformers.json" --out-md "$work/decoder_vs_transformers.md" &&
    cat "$work/decoder_vs_transformers.md" || status=1
  stamp bench
fi
if part train-check; then
  for mode in plain checkpointing; do
    timeout "${GPUCMP_TRAIN_CHECK_TIMEOUT:-200}" python3 "$repo_root/scripts/models/decoder-training-vs-pytorch.py" "$build_dir" \
      "$work/train_check_$mode" $([ $mode = checkpointing ] && echo --checkpointing) > "$work/train_check_$mode.log" 2>&1 || status=1
    tail -4 "$work/train_check_$mode.log"
    rm -rf "$work/train_check_$mode/checkpoint" "$work/train_check_$mode"/gpucmp_*.safetensors  # large, and rebuilt from the seed
  done
  stamp train-check
fi
if part train; then
  flag() { sed -n "s/.*--$1=\([^ ]*\).*/\1/p" <<< "${GPUCMP_TRAIN_FLAGS:-}"; }
  model=$(flag model) scopes=$(flag scopes) batch=$(flag batch) sequence=$(flag sequence) checkpointing=$(flag checkpointing)
  # shellcheck disable=SC2086  # the flags are words
  timeout "${GPUCMP_TRAIN_TIMEOUT:-400}" "$build_dir/benchmarks/decoder" train --gpucmp_max_time_s=2 ${GPUCMP_TRAIN_FLAGS:-} \
    --benchmark_out="$work/train.json" --benchmark_out_format=json > "$work/train.log" 2>&1 || status=1
  tail -4 "$work/train.log"
  timeout "${GPUCMP_TORCH_TRAIN_TIMEOUT:-400}" python3 "$repo_root/scripts/peers/torch_decoder_train.py" "$work/torch_train.json" \
    ${model:+--geometry "$model"} ${scopes:+--scopes "$scopes"} ${batch:+--batch "$batch"} ${sequence:+--sequence "$sequence"} \
    ${checkpointing:+--checkpointing "$checkpointing"} > "$work/torch_train.log" 2>&1 || status=1
  tail -4 "$work/torch_train.log"
  python3 "$repo_root/scripts/peers/compare-decoder-training.py" "$work/train.json" "$work/torch_train.json" \
    --out-json "$work/train_vs_pytorch.json" --out-md "$work/train_vs_pytorch.md" || status=1
  stamp train
fi
if part breakdown; then
  run=0
  for variant in ${GPUCMP_BREAKDOWN_VARIANTS:---norm_fusion=off --norm_fusion=on}; do
    run=$((run + 1))
    tag=${run}_$(tr -c 'a-zA-Z0-9\n' '_' <<< "${variant#--}")  # the first --norm_fusion=off: 1_norm_fusion_off
    # shellcheck disable=SC2086  # the flags are words
    timeout "${GPUCMP_BREAKDOWN_TIMEOUT:-240}" "$build_dir/benchmarks/decoder" --gpucmp_max_time_s=1 --breakdown \
      "$variant" ${GPUCMP_BREAKDOWN_FLAGS:---prompts=128 --batches=1,16 --contexts=2048} \
      --gpucmp_kernels_out="$work/kernels_$tag.json" --benchmark_out="$work/breakdown_$tag.json" \
      --benchmark_out_format=json > "$work/breakdown_$tag.log" 2>&1 || status=1
    grep -E "^decoder/.*(graph|kernel)" "$work/breakdown_$tag.log" | cut -c1-160
    python3 "$repo_root/scripts/kernel-breakdown.py" "$work/kernels_$tag.json" --group "GEMV kernel=gpucmp::.*gemv_kernel" \
      --group "cuBLASLt=nvjet|cublas|gemv|gemm|splitKreduce" --group "attention=attention|sdpa|fmha|flash|cudnn" \
      --group "RMSNorm=rmsnorm" --group "RoPE in the split=rope_split_qkv" --group "RoPE=rope_" \
      --group "QKV split=split_qkv" --group "SwiGLU=swiglu" --group "embedding, positions, lengths=copy_rows|fill_" \
      --out-json "$work/kernels_$tag.summary.json" --out-md "$work/kernels_$tag.md" > /dev/null || status=1
    stamp "breakdown $variant"
  done
fi
if part serve; then
  # shellcheck disable=SC2086  # the flags are words
  timeout "${GPUCMP_SERVE_TIMEOUT:-500}" "$build_dir/benchmarks/decoder" serve --out="$work/serve.json" ${GPUCMP_SERVE_FLAGS:-} \
    > "$work/serve.log" 2>&1 || status=1
  tail -15 "$work/serve.log"
  stamp serve
fi
exit $status
