#!/usr/bin/env bash
# The operations issue's side-by-side run on one GPU: gpucmp's GEMM, convolution and
# bandwidth sweeps (the compared rows), then the same shapes through PyTorch
# (torch_ops.py), then the table (compare-ops.py). Needs a build with the sweeps and a
# Python with PyTorch.
#   scripts/peers/run-ops-comparison.sh BUILD_DIR OUT_DIR
# GPUCMP_COMPARISON_PARTS (default gemm,deepbench,conv,copy; sparse adds the 2:4 sparse GEMMs)
# runs only the parts named, on both sides, when device time is short; GPUCMP_COMPARISON_KERNEL_NAMES=0 leaves out the
# kernel-mode pass that names the 8192^3 kernels (about a minute); GPUCMP_COMPARISON_EXTRAS=0
# leaves out everything round 1 runs beyond the compared rows (the heuristic's and each cuDNN
# API's rows, the whole bandwidth sweep, the kernel names).
set -uo pipefail
build_dir=${1:?usage: run-ops-comparison.sh BUILD_DIR OUT_DIR}
out_dir=${2:?usage: run-ops-comparison.sh BUILD_DIR OUT_DIR}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mkdir -p "$out_dir"
status=0
source "$here/same-libraries.sh"
# Every search of every run, one JSON line each (--gpucmp_search_log, one file per run, gathered
# into search_log.jsonl as they end).
search_log="$out_dir/search_log.jsonl"
rm -f "$search_log"
# Both sides time the same number of back-to-back calls per event pair (PyTorch: graph
# replays of that many calls; gpucmp: --gpucmp_batch), so each sample averages the GPU's
# clock and power swings over the same window. With a batch of its own choosing gpucmp's
# 8192^3 FP8 samples were 1.8 ms long and split into two clock states (753 vs 976 us), and
# their median landed on either side; PyTorch's 9 ms samples did not.
calls=20            # per event pair: DeepBench GEMMs and convolutions
large_gemm_calls=10 # per event pair: 8192^3 GEMMs
# The 8192^3 rows are timed alike on both sides: idle this long first (neither inherits the
# power state of what ran before: gpucmp's rows follow a multi-second algorithm search at
# full load), then this much warm-up, then a fixed window of this much GPU time (at least 10
# samples). Under the H200's power cap one kernel's time per call rises 3-5 % over the first
# seconds of load (scripts/peers/sustained_timeline.py), so two sides that time different
# stretches of it disagree about the same kernel: the first 0.2 s (what PyTorch's side timed
# before) read 1-3 % faster than the next 0.8 s, and gpucmp's noise rule sampled 0.8-1.7 s.
large_gemm_cooldown=${GPUCMP_COMPARISON_COOLDOWN_S:-2}
large_gemm_warmup=${GPUCMP_COMPARISON_WARMUP_S:-1}
large_gemm_window=${GPUCMP_COMPARISON_WINDOW_S:-1}
# Each step's wall time goes to the log, so a run cut short by a device call's limit still
# says where its time went.
step_started=$(date +%s)
step_done() { echo "run-ops-comparison: $1 took $(( $(date +%s) - step_started )) s"; step_started=$(date +%s); }
run() {  # name, binary, calls per sample, filter, [more flags]
  "$build_dir/benchmarks/$2" --gpucmp_batch="$3" --benchmark_filter="$4" "${@:5}" --benchmark_out="$out_dir/$1.json" \
    --benchmark_out_format=json --gpucmp_search_log="$out_dir/$1.searches.jsonl" > "$out_dir/$1.txt" 2>&1 ||
    { echo "run-ops-comparison: $1 failed"; status=1; }
  cat "$out_dir/$1.searches.jsonl" >> "$search_log" 2>/dev/null && rm -f "$out_dir/$1.searches.jsonl"
  step_done "$1"
}
large_gemms='(fp32|tf32|fp16|bf16|fp8_e4m3|fp8_e5m2|int8)/8192x8192x8192(_tn)?'
deepbench='(1760x128x1760|2560x64x2560|4096x128x4096|4096x7000x4096|5124x9124x2560_tn|35x8457x2560|7680x128x2560|3072x128x1024_tn|1024x16x500000|7680x24000x2560|512x24000x2816)'
parts=${GPUCMP_COMPARISON_PARTS:-gemm,deepbench,conv,copy}
# GPUCMP_SPARSE_SHAPES (a regular expression over m x n x k, default every shape) narrows the
# sparse part on both sides.
sparse_shapes=${GPUCMP_SPARSE_SHAPES:-[0-9x]+}
part() { [[ ",$parts," == *",$1,"* ]]; }
gpucmp_round() {  # round number
  # Round 1 also runs gpucmp's own comparisons (the heuristic's choice, each cuDNN API alone,
  # the whole bandwidth sweep); later rounds only the rows compared with PyTorch, so two
  # rounds fit one 10-minute device call.
  local gemm_providers='cublaslt[a-z_]*' conv_providers='cudnn[a-z_]*' bandwidth='.'
  if (($1 > 1)) || [[ ${GPUCMP_COMPARISON_EXTRAS:-1} == 0 ]]; then
    gemm_providers='cublaslt' conv_providers='cudnn'
    bandwidth='^copy/(kernel|cudaMemcpyAsync_d2d)/none/(1073741824|4294967296)/hot/'
  fi
  # 8192^3 in the compared precisions, searched and the heuristic's first choice (PyTorch's way
  # of choosing: a control of what the two harnesses do to one algorithm); DeepBench shapes in
  # FP16 and TF32.
  if part gemm; then
    run "gemm_$1" gemm_sweep "$large_gemm_calls" "^gemm/cublaslt(_heuristic)?/$large_gemms/graph" \
      --gpucmp_cooldown_s="$large_gemm_cooldown" --gpucmp_warmup_s="$large_gemm_warmup" --gpucmp_window_s="$large_gemm_window"
    if (($1 == 1)) && [[ ${GPUCMP_COMPARISON_KERNEL_NAMES:-1} != 0 && ${GPUCMP_COMPARISON_EXTRAS:-1} != 0 ]]; then  # which kernel each algorithm runs, once
      "$build_dir/benchmarks/gemm_sweep" --benchmark_filter="^gemm/cublaslt(_heuristic)?/$large_gemms/kernel" \
        --gpucmp_kernels_out="$out_dir/gemm_kernels.json" > "$out_dir/gemm_kernels.txt" 2>&1 ||
        { echo "run-ops-comparison: gemm kernel names failed"; status=1; }
      step_done gemm_kernel_names
    fi
    gpucmp_files+=("$out_dir/gemm_$1.json")
  fi
  if part deepbench; then
    run "deepbench_$1" gemm_sweep "$calls" "^gemm/$gemm_providers/(fp16|tf32)/$deepbench/"
    gpucmp_files+=("$out_dir/deepbench_$1.json")
  fi
  # ResNet-50 FP16 NHWC forward convolutions at batch 32 and 256.
  if part conv; then
    run "conv_$1" conv_sweep "$calls" "^conv_fwd/$conv_providers/fp16_nhwc/n(32|256)_"
    gpucmp_files+=("$out_dir/conv_$1.json")
  fi
  # 2:4 sparse GEMMs beside the dense GEMM of the same layout (sparse_gemm_sweep), searched;
  # round 1 also cuSPARSELt's default configuration.
  if part sparse; then
    local sparse_providers='cusparselt(_default)?'
    (($1 > 1)) && sparse_providers='cusparselt'
    run "sparse_$1" sparse_gemm_sweep "$calls" "^(sparse_gemm/$sparse_providers|gemm/cublaslt)/[a-z0-9_]+/($sparse_shapes)(_tn)?/"
    gpucmp_files+=("$out_dir/sparse_$1.json")
  fi
  # The copy check compares two gpucmp rows of the same batch; the sweep chooses its own.
  if part copy; then
    "$build_dir/benchmarks/bandwidth_sweep" --benchmark_filter="$bandwidth" --benchmark_out="$out_dir/bandwidth_$1.json" \
      --benchmark_out_format=json > "$out_dir/bandwidth_$1.txt" 2>&1 || { echo "run-ops-comparison: bandwidth_$1 failed"; status=1; }
    step_done "bandwidth_$1"
    gpucmp_files+=("$out_dir/bandwidth_$1.json")
  fi
}
torch_round() {  # round number
  python3 "$here/torch_ops.py" --only "$parts" --sparse-shapes "^($sparse_shapes)\$" --calls "$calls" --large-gemm-calls "$large_gemm_calls" \
    --large-gemm-cooldown "$large_gemm_cooldown" --large-gemm-warmup "$large_gemm_warmup" \
    --large-gemm-window "$large_gemm_window" --out "$out_dir/torch_ops_$1.json" \
    > "$out_dir/torch_ops_$1.log" 2>&1 ||
    { echo "run-ops-comparison: torch_ops.py failed"; tail -20 "$out_dir/torch_ops_$1.log"; status=1; }
  step_done "torch_ops_$1"
  torch_files+=("$out_dir/torch_ops_$1.json")
}
# Which cuBLAS/cuBLASLt call PyTorch makes for each 8192^3 GEMM (types, layout, algorithm),
# from the libraries' own API logs: whether both sides ran the same call and kernel.
if part gemm; then
  python3 "$here/torch_gemm_calls.py" --out "$out_dir/torch_gemm_calls.json" > "$out_dir/torch_gemm_calls.log" 2>&1 ||
    { echo "run-ops-comparison: torch_gemm_calls.py failed"; tail -5 "$out_dir/torch_gemm_calls.log"; status=1; }
  step_done torch_gemm_calls
fi
# GPUCMP_COMPARISON_ROUNDS=N (default 1) runs each side N times, interleaved A B B A A B ...,
# so drift of clocks and temperature over the run falls on both sides alike; the table uses
# each row's median over the rounds.
rounds=${GPUCMP_COMPARISON_ROUNDS:-1}
gpucmp_files=()
torch_files=()
for ((r = 1; r <= rounds; r++)); do
  if ((r % 2)); then gpucmp_round "$r"; torch_round "$r"; else torch_round "$r"; gpucmp_round "$r"; fi
done
python3 "$here/compare-ops.py" --parts "$parts" --torch-calls "$out_dir/torch_gemm_calls.json" \
  --gpucmp-kernels "$out_dir/gemm_kernels.json" --gpucmp "${gpucmp_files[@]}" --torch "${torch_files[@]}" \
  --out-md "$out_dir/ops_vs_pytorch.md" --out-json "$out_dir/ops_vs_pytorch.json" || status=1
exit $status
