#!/usr/bin/env bash
# On a GPU machine: the quantized inference issue's layer runs, in parts, each packed into
# OUT_DIR/quantized.tgz as it ends (a device call cut short still returns what finished):
#   build     gpucmp_models_tests, benchmarks/conv_layers, benchmarks/resnet50 and the probes, for the
#             local GPU (GPUCMP_BUILD_TARGETS names fewer)
#   tests     gpucmp_models_tests "[quantized],[calibration]" or GPUCMP_QUANTIZED_TESTS (FP8 and INT8 layers on every path
#             cuDNN offers against the FP64 reference; calibration's counts on the GPU)
#   layers    benchmarks/conv_layers on the rows GPUCMP_LAYER_FILTER names (default: batch 32),
#             each verified before it is timed, then scripts/models/conv-layer-ratios.py: each
#             precision beside FP16 on the same shape
#   network   benchmarks/resnet50 in GPUCMP_NETWORK_DTYPES (default fp16,int8,fp8_e4m3) at
#             GPUCMP_NETWORK_BATCHES (default 32,256), one process per batch of at most
#             GPUCMP_NETWORK_TIMEOUT s, graph mode (GPUCMP_NETWORK_FILTER), calibrated over 512
#             random images, accuracy against FP32 on 512 others beside every row; each
#             network's layers and plan in network_layers_bs<N>.md, each layer's time in FP16
#             beside the quantized networks' in layers_bs<N>.md (lab/runs/quantized-tables.py)
#   sums      lab/probes/int8_conv_sums: each plain INT8 plan's INT32 sums against exact ones
#             (the saturation test's failure), in sums.md
#   modes     lab/probes/matmul_1x1_modes: which cuBLASLt matmuls run a 1x1 INT8 or FP8 layer
#             whole, verified and timed beside FP16, at GPUCMP_MODES_BATCHES (default 32 256), in modes.md
#             and as a table in modes_table.md
#   tiles     lab/probes/quantized_kernel_tiles: each tile of gpucmp's implicit GEMM beside cuDNN's
#             fused graph on ResNet-50's distinct layers at GPUCMP_TILES_BATCHES (default 32 256) in
#             GPUCMP_TILES_FORMATS (default int8 fp8), in tiles.md
#   ncu       Nsight Compute's sections (speed of light, memory, warp states, occupancy, scheduler,
#             instructions) and each stall reason's cycles per issued instruction on the first
#             GPUCMP_NCU_LAUNCHES (default 4) launches of gpucmp's kernel in each layer
#             GPUCMP_NCU_LAYERS names (substrings; default the stem, stage 1's 3x3 and its 1x1
#             into 256 channels), batch 32 INT8, in ncu.txt
#   lab/runs/quantized-check.sh OUT_DIR [PARTS, comma-separated; default build,tests,layers]
# CUDNN_FRONTEND_ROOT names cudnn-frontend's headers where the machine has no network;
# GPUCMP_COMMIT the commit of the tree sent (recorded in run.json).
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/common.sh"
out_dir=${1:?usage: quantized-check.sh OUT_DIR [PARTS]}
parts=${2:-build,tests,layers}
work="$out_dir/quantized"
mkdir -p "$work"
part() { [[ ",$parts," == *",$1,"* ]]; }
status=0
stamp() { echo "$1: $SECONDS s (status $status)"; tar -C "$out_dir" -czf "$out_dir/quantized.tgz" quantized; }
gpucmp_local_architecture
commit=$(gpucmp_tree_commit)
printf '{"commit": "%s", "date": "%s", "gpu": "%s"}\n' "$commit" "$(date -u +%F)" \
  "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" > "$work/run.json"
if part build; then
  { GPUCMP_EXTRA_CMAKE_ARGS="${GPUCMP_EXTRA_CMAKE_ARGS:-} -DGPUCMP_BUILD_TESTS=ON -DGPUCMP_BUILD_BENCHMARKS=ON -DGPUCMP_BUILD_LAB=ON" \
      gpucmp_configure && gpucmp_build --target ${GPUCMP_BUILD_TARGETS:-gpucmp_models_tests conv_layers resnet50 int8_conv_sums matmul_1x1_modes quantized_kernel_tiles}; } > "$work/build.log" 2>&1 ||
    { status=1; tail -30 "$work/build.log"; stamp build; exit 1; }
  stamp build
fi
source "$repo_root/scripts/peers/same-libraries.sh"
if part tests; then
  timeout "${GPUCMP_CHECK_TEST_TIMEOUT:-240}" "$build_dir/tests/gpucmp_models_tests" "${GPUCMP_QUANTIZED_TESTS:-[quantized],[calibration]}" --durations yes \
    > "$work/test_quantized.log" 2>&1 || status=1
  echo "quantized: $(grep -E "test cases|FAILED" "$work/test_quantized.log" | tail -2 | tr '\n' ' ')"
  grep -A3 "warning:" "$work/test_quantized.log" | grep -v "^--" | head -40
  stamp tests
fi
if part layers; then
  timeout "${GPUCMP_LAYER_TIMEOUT:-300}" "$build_dir/benchmarks/conv_layers" --benchmark_filter="${GPUCMP_LAYER_FILTER:-/n32_}" \
    --gpucmp_max_time_s="${GPUCMP_LAYER_MAX_TIME:-0.3}" --benchmark_out="$work/conv_layers.json" --benchmark_out_format=json \
    > "$work/conv_layers.log" 2>&1 || status=1
  python3 "$repo_root/scripts/models/conv-layer-ratios.py" "$work/conv_layers.json" --out-md "$work/conv_layers.md" || status=1
  stamp layers
fi
if part network; then
  # One process per batch, each packed as it ends: a call cut short keeps the batches that
  # finished. The first calibrates and writes the file; the others read it.
  batches=${GPUCMP_NETWORK_BATCHES:-32,256}
  for batch in ${batches//,/ }; do
    calibration="--calibration_out=$work/calibration.json"
    [ -f "$work/calibration.json" ] && calibration="--calibration=$work/calibration.json"
    timeout "${GPUCMP_NETWORK_TIMEOUT:-300}" "$build_dir/benchmarks/resnet50" --dtypes="${GPUCMP_NETWORK_DTYPES:-fp16,int8,fp8_e4m3}" \
      --batches="$batch" --benchmark_filter="${GPUCMP_NETWORK_FILTER:-/graph}" "$calibration" \
      --layers_out="$work/network_layers_bs$batch.md" --benchmark_out="$work/resnet50_bs$batch.json" --benchmark_out_format=json \
      > "$work/resnet50_bs$batch.log" 2>&1 || status=1
    grep -E "^resnet50/|rror" "$work/resnet50_bs$batch.log" | cut -c1-300 | head -20
    stamp "network batch $batch"
  done
  python3 "$repo_root/scripts/models/network-precisions.py" "$work"/resnet50_bs*.json --out-md "$work/resnet50.md" \
    --out-json "$work/resnet50_precisions.json" || status=1
  cat "$work/resnet50.md"
  for batch in ${batches//,/ }; do
    python3 "$repo_root/lab/runs/quantized-tables.py" layers "$work/network_layers_bs$batch.md" > "$work/layers_bs$batch.md" || status=1
  done
  stamp network
fi
if part sums; then
  timeout 120 "$build_dir/lab/int8_conv_sums" > "$work/sums.md" 2>&1 || status=1
  cat "$work/sums.md"
  stamp sums
fi
if part modes; then
  timeout "${GPUCMP_MODES_TIMEOUT:-180}" "$build_dir/lab/matmul_1x1_modes" ${GPUCMP_MODES_BATCHES:-32 256} > "$work/modes.md" 2>&1 || status=1
  python3 "$repo_root/lab/runs/quantized-tables.py" modes "$work/modes.md" > "$work/modes_table.md" || status=1
  cat "$work/modes_table.md"
  stamp modes
fi
if part tiles; then
  for format in ${GPUCMP_TILES_FORMATS:-int8 fp8}; do
    for batch in ${GPUCMP_TILES_BATCHES:-32 256}; do
      timeout "${GPUCMP_TILES_TIMEOUT:-150}" "$build_dir/lab/quantized_kernel_tiles" "$batch" "$format" >> "$work/tiles.md" \
        2>> "$work/tiles.log" || status=1
      echo >> "$work/tiles.md"
    done
  done
  cat "$work/tiles.md"
  stamp tiles
fi
if part ncu; then
  # --clock-control none: the clocks stay as they are (the device tool's rule). Each layer's
  # first launches are its tiles' verification runs, one a tile; beside the sections, why the
  # warps wait (hardware counters: this machine has no PC sampling), per issued instruction.
  for layer in ${GPUCMP_NCU_LAYERS:-space-to-depth layer1.x.conv2 layer1.x.conv3}; do
    echo "### $layer" >> "$work/ncu.txt"
    timeout "${GPUCMP_NCU_TIMEOUT:-240}" ncu --clock-control none --kernel-name regex:quantized_conv_kernel \
      --launch-count "${GPUCMP_NCU_LAUNCHES:-4}" --section SpeedOfLight --section MemoryWorkloadAnalysis \
      --section WarpStateStats --section Occupancy --section LaunchStats --section ComputeWorkloadAnalysis \
      --section SchedulerStats --section InstructionStats \
      --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio" \
      "$build_dir/lab/quantized_kernel_tiles" 32 int8 "$layer" >> "$work/ncu.txt" 2>&1 || status=1
  done
  grep -E "^### |quantized_conv_kernel|Duration|DRAM Throughput|Compute \(SM\)|Achieved Occupancy|Registers Per|Warp Cycles Per Issued|issue_stalled" \
    "$work/ncu.txt" | awk '$NF+0 >= 0.05 || !/issue_stalled/' | head -150
  stamp ncu
fi
exit $status
