#!/usr/bin/env bash
# On a GPU machine: the 2:4 sparse GEMM's first runs, in parts, each packed into
# OUT_DIR/sparse.tgz as it ends (a device call cut short still returns what finished):
#   build     the operation tests and the sparse GEMM sweep, for the local GPU
#   tests     gpucmp_ops_tests [sparse_gemm] (and, with GPUCMP_CHECK_TAGS, other tags)
#   compare   scripts/peers/run-ops-comparison.sh's sparse part beside PyTorch on the shapes
#             GPUCMP_SPARSE_SHAPES names (default: 8192^3 and Llama-3-8B's MLP at 4096 tokens)
#   lab/runs/sparse-check.sh OUT_DIR [PARTS, comma-separated; default build,tests]
# CUDNN_FRONTEND_ROOT names cudnn-frontend's headers where the machine has no network;
# GPUCMP_COMMIT the commit of the tree sent (recorded in run.json).
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/common.sh"
out_dir=${1:?usage: sparse-check.sh OUT_DIR [PARTS]}
parts=${2:-build,tests}
work="$out_dir/sparse"
mkdir -p "$work"
part() { [[ ",$parts," == *",$1,"* ]]; }
status=0
stamp() { echo "$1: $SECONDS s (status $status)"; tar -C "$out_dir" -czf "$out_dir/sparse.tgz" sparse; }
gpucmp_local_architecture
commit=$(gpucmp_tree_commit)
printf '{"commit": "%s", "date": "%s", "gpu_uuid": "%s"}\n' "$commit" "$(date -u +%F)" \
  "$(nvidia-smi --query-gpu=uuid --format=csv,noheader | head -1)" > "$work/run.json"
if part build; then
  "$repo_root/scripts/install-deps.sh" > "$work/deps.log" 2>&1
  { GPUCMP_EXTRA_CMAKE_ARGS="${GPUCMP_EXTRA_CMAKE_ARGS:-} -DGPUCMP_BUILD_TESTS=ON -DGPUCMP_BUILD_BENCHMARKS=ON" gpucmp_configure &&
    gpucmp_build --target gpucmp_ops_tests sparse_gemm_sweep; } > "$work/build.log" 2>&1 ||
    { status=1; tail -30 "$work/build.log"; stamp build; exit 1; }
  grep -i "cusparselt" "$work/build.log" | head -2
  stamp build
fi
if part tests; then
  for tag in ${GPUCMP_CHECK_TAGS:-sparse_gemm}; do
    timeout "${GPUCMP_CHECK_TEST_TIMEOUT:-300}" "$build_dir/tests/gpucmp_ops_tests" "[$tag]" --durations yes \
      > "$work/test_$tag.log" 2>&1 || status=1
    echo "$tag: $(grep -E "test cases|FAILED" "$work/test_$tag.log" | tail -2 | tr '\n' ' ')"
    stamp "test $tag"
  done
fi
if part compare; then
  GPUCMP_COMPARISON_PARTS=sparse GPUCMP_SPARSE_SHAPES="${GPUCMP_SPARSE_SHAPES:-8192x8192x8192|28672x4096x4096|4096x4096x14336}" \
    GPUCMP_COMMIT="$commit" "$repo_root/scripts/peers/run-ops-comparison.sh" "$build_dir" "$work/compare" \
    > "$work/compare.log" 2>&1 || status=1
  tail -8 "$work/compare.log"
  stamp compare
fi
exit $status
