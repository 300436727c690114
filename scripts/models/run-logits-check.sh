#!/usr/bin/env bash
# The models issue's correctness check on a GPU machine: exports torchvision's ResNet-50 and a
# 64-image batch (export_resnet50.py), runs gpucmp's network on them in every precision
# (benchmarks/resnet50_logits), and tables the logits' errors (compare-logits.py).
#   scripts/models/run-logits-check.sh BUILD_DIR OUT_DIR
set -uo pipefail
build_dir=${1:?usage: run-logits-check.sh BUILD_DIR OUT_DIR}
out_dir=${2:?usage: run-logits-check.sh BUILD_DIR OUT_DIR}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mkdir -p "$out_dir"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 "$here/export_resnet50.py" "$work" --batch 64 > "$out_dir/export.log" 2>&1 ||
  { echo "run-logits-check: export failed"; tail -20 "$out_dir/export.log"; exit 1; }
status=0
logits=()
# Each precision runs in GPUCMP_LOGITS_PROCESSES separate processes (default 2): an upload race
# once corrupted FP16 weights differently in every process while each process's own checks
# agreed with what it had read (results/h200/models/fp16_logits_investigation.md).
processes=${GPUCMP_LOGITS_PROCESSES:-2}
for ((p = 1; p <= processes; p++)); do
  for dtype in fp32 tf32 fp16 bf16; do
    label=$dtype; ((p > 1)) && label="$dtype@$p"
    "$build_dir/benchmarks/resnet50_logits" "$work/resnet50.safetensors" "$work/images.safetensors" "$dtype" \
      "$work/logits_$label.bin" >> "$out_dir/resnet50_logits.log" 2>&1 || { echo "run-logits-check: $label failed"; status=1; continue; }
    logits+=("$label=$work/logits_$label.bin")
  done
done
# FP32 with NCHW activations (network_options::layout), the layout of the FP32 speed comparison.
"$build_dir/benchmarks/resnet50_logits" "$work/resnet50.safetensors" "$work/images.safetensors" fp32 \
  "$work/logits_fp32_nchw.bin" --layout=nchw >> "$out_dir/resnet50_logits.log" 2>&1 &&
  logits+=("fp32_nchw=$work/logits_fp32_nchw.bin") || { echo "run-logits-check: fp32_nchw failed"; status=1; }
# GPUCMP_LOGITS_DIAGNOSTIC=1: also an FP16 run with every convolution output checked, every
# layer traced against the FP32 network and each layer's verification pass compared with a
# plain pass (what found the upload race; docs/results/h200-models.md).
if [ "${GPUCMP_LOGITS_DIAGNOSTIC:-0}" = 1 ]; then
  "$build_dir/benchmarks/resnet50_logits" "$work/resnet50.safetensors" "$work/images.safetensors" fp16 \
    "$work/logits_fp16_diagnostic.bin" --full-check --layer-diff --trace=fp32 > "$out_dir/fp16_diagnostic.log" 2>&1
  echo "run-logits-check: fp16 diagnostic run exited $?"
  [ -s "$work/logits_fp16_diagnostic.bin" ] && logits+=("fp16_diagnostic_run=$work/logits_fp16_diagnostic.bin")
fi
python3 "$here/compare-logits.py" "$work/reference.json" --logits "${logits[@]}" \
  --out-md "$out_dir/logits_vs_torchvision.md" --out-json "$out_dir/logits_vs_torchvision.json" || status=1
exit $status
