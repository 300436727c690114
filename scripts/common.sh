# Shared by the scripts: configure and build gpucmp in BUILD_DIR (default: build).
# Sourced, not run. Honours CMAKE_CUDA_ARCHITECTURES and GPUCMP_EXTRA_CMAKE_ARGS.
repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${BUILD_DIR:-$repo_root/build}
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi

gpucmp_configure() {
  local args=(-S "$repo_root" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release)
  [ -n "${CMAKE_CUDA_ARCHITECTURES:-}" ] && args+=("-DCMAKE_CUDA_ARCHITECTURES=$CMAKE_CUDA_ARCHITECTURES")
  # shellcheck disable=SC2206
  [ -n "${GPUCMP_EXTRA_CMAKE_ARGS:-}" ] && args+=($GPUCMP_EXTRA_CMAKE_ARGS)
  cmake "${args[@]}"
}

gpucmp_build() {
  cmake --build "$build_dir" --parallel "$(nproc)" "$@"
}

# The code a run measures, for its records: GPUCMP_COMMIT when set, else HEAD's short hash, with
# "+changes" when the tracked files differ from it (a copied working tree can carry an older
# HEAD than its files: a GPU machine's copy once reported the session's first commit).
gpucmp_tree_commit() {
  if [ -n "${GPUCMP_COMMIT:-}" ]; then
    echo "$GPUCMP_COMMIT"
    return
  fi
  local head
  head=$(git -C "$repo_root" rev-parse --short HEAD 2>/dev/null) || { echo unknown; return; }
  if git -C "$repo_root" diff --quiet HEAD -- 2>/dev/null; then echo "$head"; else echo "$head+changes"; fi
}

gpu_present() {
  command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1
}

# CMAKE_CUDA_ARCHITECTURES for the local GPU (compute capability 8.9 -> 89; 9.0 -> 90a, Hopper's
# arch-specific code, which has wgmma) unless it is set: a GPU machine's runs build its own
# machine code only.
gpucmp_local_architecture() {
  if [ -z "${CMAKE_CUDA_ARCHITECTURES:-}" ]; then
    CMAKE_CUDA_ARCHITECTURES=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d '.')
    [ "$CMAKE_CUDA_ARCHITECTURES" = 90 ] && CMAKE_CUDA_ARCHITECTURES=90a
    export CMAKE_CUDA_ARCHITECTURES
  fi
}
