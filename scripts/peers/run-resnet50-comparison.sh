#!/usr/bin/env bash
# The models issue's side-by-side run on one GPU: gpucmp's resnet50 benchmark (FP32 in NHWC and
# NCHW) and torch_resnet50.py on the same precisions and batches, interleaved over
# GPUCMP_COMPARISON_ROUNDS rounds (default 1), then compare-resnet50.py's table. gpucmp runs on
# PyTorch's own cuDNN and cuBLASLt (same-libraries.sh), so the comparison is about method.
#   scripts/peers/run-resnet50-comparison.sh BUILD_DIR OUT_DIR
# GPUCMP_RESNET50_DTYPES (default fp16,tf32,fp32) and GPUCMP_RESNET50_BATCHES (FP16's, default
# 16,32,64,128,256) run less, on both sides, when device time is short.
set -uo pipefail
build_dir=${1:?usage: run-resnet50-comparison.sh BUILD_DIR OUT_DIR}
out_dir=${2:?usage: run-resnet50-comparison.sh BUILD_DIR OUT_DIR}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mkdir -p "$out_dir"
source "$here/same-libraries.sh"
status=0
dtypes=${GPUCMP_RESNET50_DTYPES:-fp16,tf32,fp32}
batches=${GPUCMP_RESNET50_BATCHES:-16,32,64,128,256}
has_dtype() { [[ ",$dtypes," == *",$1,"* ]]; }
gpucmp_round() {
  if has_dtype fp16; then
    "$build_dir/benchmarks/resnet50" --dtypes=fp16 --batches="$batches" --layers_out="$out_dir/layers_fp16.md" \
      --benchmark_out="$out_dir/gpucmp_fp16_$1.json" --benchmark_out_format=json > "$out_dir/gpucmp_fp16_$1.txt" 2>&1 || status=1
    gpucmp_files+=("$out_dir/gpucmp_fp16_$1.json")
  fi
  # TF32 in NHWC (tensor cores); FP32 in both layouts, the faster one counts (as PyTorch's does).
  if has_dtype tf32; then
    "$build_dir/benchmarks/resnet50" --dtypes=tf32 --batches=16,32,64 --layers_out="$out_dir/layers_fp32.md" \
      --benchmark_out="$out_dir/gpucmp_tf32_$1.json" --benchmark_out_format=json > "$out_dir/gpucmp_tf32_$1.txt" 2>&1 || status=1
    gpucmp_files+=("$out_dir/gpucmp_tf32_$1.json")
  fi
  if has_dtype fp32; then
    "$build_dir/benchmarks/resnet50" --dtypes=fp32 --layouts=nhwc,nchw --batches=16,32,64 --layers_out="$out_dir/layers_fp32.md" \
      --benchmark_out="$out_dir/gpucmp_fp32_$1.json" --benchmark_out_format=json > "$out_dir/gpucmp_fp32_$1.txt" 2>&1 || status=1
    gpucmp_files+=("$out_dir/gpucmp_fp32_$1.json")
  fi
}
torch_round() {
  (cd "$here" && python3 torch_resnet50.py --out "$out_dir/torch_$1.json" --dtypes "$dtypes" --batches "$batches") \
    > "$out_dir/torch_$1.log" 2>&1 ||
    { echo "run-resnet50-comparison: torch_resnet50.py failed"; tail -20 "$out_dir/torch_$1.log"; status=1; }
  torch_files+=("$out_dir/torch_$1.json")
}
rounds=${GPUCMP_COMPARISON_ROUNDS:-1}
gpucmp_files=()
torch_files=()
rm -f "$out_dir/layers_fp16.md" "$out_dir/layers_fp32.md"
for ((r = 1; r <= rounds; r++)); do
  if ((r % 2)); then gpucmp_round "$r"; torch_round "$r"; else torch_round "$r"; gpucmp_round "$r"; fi
done
python3 "$here/compare-resnet50.py" --gpucmp "${gpucmp_files[@]}" --torch "${torch_files[@]}" \
  --dtypes "$dtypes" --fp16-batches "$batches" --out-md "$out_dir/resnet50_vs_pytorch.md" --out-json "$out_dir/resnet50_vs_pytorch.json" || status=1
exit $status
