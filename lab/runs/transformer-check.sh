#!/usr/bin/env bash
# On a GPU machine: the transformer building blocks' runs, in parts, each packed into
# OUT_DIR/transformer.tgz as it ends (a device call cut short still returns what finished):
#   build     the operation tests, benchmarks/transformer_ops, attention_sweep and gemv_sweep
#   tests     gpucmp_ops_tests for each tag of GPUCMP_CHECK_TAGS (default: attention gemv rmsnorm
#             rope swiglu)
#   attention benchmarks/attention_sweep (forward and backward rows; GPUCMP_ATTENTION_FILTER)
#             beside scripts/peers/torch_attention.py on the same shapes (PyTorch's cuDNN, flash
#             and efficient backends; gpucmp on PyTorch's cuDNN, as scripts/peers/same-libraries.sh
#             arranges), joined by scripts/peers/compare-attention.py
#   gemv      benchmarks/gemv_sweep (GPUCMP_GEMV_FILTER) and scripts/peers/torch_gemv.py on the
#             same shapes, joined by scripts/bandwidth-fraction.py --peer (copy rate and PyTorch)
#   bench     benchmarks/transformer_ops (GPUCMP_BENCH_FILTER selects rows), then
#             scripts/bandwidth-fraction.py: each row as a fraction of the same run's copy rate
#   lab/runs/transformer-check.sh OUT_DIR [PARTS, comma-separated; default build,tests,attention,gemv,bench]
# CUDNN_FRONTEND_ROOT names cudnn-frontend's headers where the machine has no network;
# GPUCMP_COMMIT the commit of the tree sent (recorded in run.json); GPUCMP_CHECK_TARGETS the
# build's targets (default: all four).
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/common.sh"
out_dir=${1:?usage: transformer-check.sh OUT_DIR [PARTS]}
parts=${2:-build,tests,attention,gemv,bench}
work="$out_dir/transformer"
mkdir -p "$work"
part() { [[ ",$parts," == *",$1,"* ]]; }
status=0
stamp() { echo "$1: $SECONDS s (status $status)"; tar -C "$out_dir" -czf "$out_dir/transformer.tgz" transformer; }
gpucmp_local_architecture
commit=$(gpucmp_tree_commit)
printf '{"commit": "%s", "date": "%s", "gpu": "%s"}\n' "$commit" "$(date -u +%F)" \
  "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" > "$work/run.json"
if part build; then
  { GPUCMP_EXTRA_CMAKE_ARGS="${GPUCMP_EXTRA_CMAKE_ARGS:-} -DGPUCMP_BUILD_TESTS=ON -DGPUCMP_BUILD_BENCHMARKS=ON" gpucmp_configure &&
    gpucmp_build --target ${GPUCMP_CHECK_TARGETS:-gpucmp_ops_tests transformer_ops attention_sweep gemv_sweep}; } > "$work/build.log" 2>&1 ||
    { status=1; tail -30 "$work/build.log"; stamp build; exit 1; }
  stamp build
fi
if part tests; then
  for tag in ${GPUCMP_CHECK_TAGS:-attention gemv rmsnorm rope swiglu}; do
    timeout "${GPUCMP_CHECK_TEST_TIMEOUT:-300}" "$build_dir/tests/gpucmp_ops_tests" "[$tag]" --durations yes \
      > "$work/test_$tag.log" 2>&1 || status=1
    echo "$tag: $(grep -E "test cases|FAILED" "$work/test_$tag.log" | tail -2 | tr '\n' ' ')"
    stamp "test $tag"
  done
fi
if part attention; then
  (
    source "$repo_root/scripts/peers/same-libraries.sh"
    timeout "${GPUCMP_ATTENTION_TIMEOUT:-540}" "$build_dir/benchmarks/attention_sweep" --gpucmp_max_time_s=1 \
      --benchmark_filter="${GPUCMP_ATTENTION_FILTER:-.}" --benchmark_out="$work/attention_sweep.json" \
      --benchmark_out_format=json > "$work/attention.log" 2>&1
  ) || status=1
  tail -2 "$work/attention.log"
  timeout "${GPUCMP_TORCH_TIMEOUT:-300}" python3 "$repo_root/scripts/peers/torch_attention.py" "$work/torch_attention.json" \
    --shapes "${GPUCMP_ATTENTION_FILTER:-.}" > "$work/torch_attention.log" 2>&1 || status=1
  python3 "$repo_root/scripts/peers/compare-attention.py" "$work/attention_sweep.json" "$work/torch_attention.json" \
    --out-json "$work/attention_vs_pytorch.json" --out-md "$work/attention_vs_pytorch.md" && cat "$work/attention_vs_pytorch.md" || status=1
  if grep -q paged "$work/attention_sweep.json" 2>/dev/null; then  # decode rows: KV bytes against the copy rate
    python3 "$repo_root/scripts/bandwidth-fraction.py" "$work/attention_sweep.json" --prefix attention --match paged \
      --out-json "$work/paged_decode.json" --out-md "$work/paged_decode.md" && cat "$work/paged_decode.md" || status=1
  fi
  stamp attention
fi
if part gemv; then
  timeout "${GPUCMP_GEMV_TIMEOUT:-400}" "$build_dir/benchmarks/gemv_sweep" --gpucmp_max_time_s=1 \
    --benchmark_filter="${GPUCMP_GEMV_FILTER:-.}" --benchmark_out="$work/gemv_sweep.json" --benchmark_out_format=json \
    > "$work/gemv.log" 2>&1 || status=1
  tail -2 "$work/gemv.log"
  timeout 200 python3 "$repo_root/scripts/peers/torch_gemv.py" "$work/torch_gemv.json" > "$work/torch_gemv.log" 2>&1 || status=1
  python3 "$repo_root/scripts/bandwidth-fraction.py" "$work/gemv_sweep.json" --prefix gemv --peer "$work/torch_gemv.json" \
    --out-json "$work/gemv_vs_copy.json" --out-md "$work/gemv_vs_copy.md" && cat "$work/gemv_vs_copy.md" || status=1
  stamp gemv
fi
if part bench; then
  timeout "${GPUCMP_BENCH_TIMEOUT:-400}" "$build_dir/benchmarks/transformer_ops" --gpucmp_max_time_s=1 \
    --benchmark_filter="${GPUCMP_BENCH_FILTER:-.}" --benchmark_out="$work/transformer_ops.json" --benchmark_out_format=json \
    > "$work/bench.log" 2>&1 || status=1
  tail -3 "$work/bench.log"
  python3 "$repo_root/scripts/bandwidth-fraction.py" "$work/transformer_ops.json" --out-json "$work/bandwidth_fraction.json" \
    --out-md "$work/bandwidth_fraction.md" && grep -E "/8192x" "$work/bandwidth_fraction.md" || status=1
  stamp bench
fi
exit $status
