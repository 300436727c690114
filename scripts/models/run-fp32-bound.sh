#!/usr/bin/env bash
# The models issue's FP32 question on a GPU machine: how much faster than PyTorch can an FP32
# ResNet-50 made of cuDNN convolutions be? Times the 53 convolutions in FP32 (PyTorch NCHW and
# NHWC, gpucmp's search in NCHW at batch 32) and both whole networks, then
# fp32-conv-bound.py's table. gpucmp runs on PyTorch's cuDNN (same-libraries.sh).
#   scripts/models/run-fp32-bound.sh BUILD_DIR OUT_DIR
set -uo pipefail
build_dir=${1:?usage: run-fp32-bound.sh BUILD_DIR OUT_DIR}
out_dir=${2:?usage: run-fp32-bound.sh BUILD_DIR OUT_DIR}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
peers="$here/../peers"
mkdir -p "$out_dir"
source "$peers/same-libraries.sh"
status=0
"$build_dir/benchmarks/conv_sweep" --benchmark_filter='^conv_fwd/cudnn/fp32_nchw/n32_' \
  --benchmark_out="$out_dir/gpucmp_conv_fp32.json" --benchmark_out_format=json > "$out_dir/gpucmp_conv_fp32.txt" 2>&1 || status=1
batches=${GPUCMP_FP32_BOUND_BATCHES:-16,32,64}  # the networks'; conv_sweep has batch 32 (and 256)
"$build_dir/benchmarks/resnet50" --dtypes=fp32 --batches="$batches" \
  --benchmark_out="$out_dir/gpucmp_resnet50_fp32.json" --benchmark_out_format=json > "$out_dir/gpucmp_resnet50_fp32.txt" 2>&1 || status=1
(cd "$peers" && python3 torch_ops.py --only conv_fp32 --fp32-conv-batches "$batches" --out "$out_dir/torch_conv_fp32.json") > "$out_dir/torch_conv_fp32.log" 2>&1 || status=1
(cd "$peers" && python3 torch_resnet50.py --dtypes fp32 --fp32-batches "$batches" --out "$out_dir/torch_resnet50_fp32.json") \
  > "$out_dir/torch_resnet50_fp32.log" 2>&1 || status=1
python3 "$here/fp32-conv-bound.py" --torch-ops "$out_dir/torch_conv_fp32.json" --gpucmp-conv "$out_dir/gpucmp_conv_fp32.json" \
  --torch-resnet50 "$out_dir/torch_resnet50_fp32.json" --gpucmp-resnet50 "$out_dir/gpucmp_resnet50_fp32.json" \
  --out-md "$out_dir/fp32_conv_bound.md" --out-json "$out_dir/fp32_conv_bound.json" || status=1
exit $status
