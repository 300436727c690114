#!/usr/bin/env bash
# Installs what gpucmp's build needs and the machine lacks: CMake >= 3.24, Ninja, Google
# Benchmark, Catch2 (v2 or v3) and Open MPI, from the distribution's packages; with
# GPUCMP_INSTALL_BROWSER=1 also Chromium, which the HTML report test renders the page in
# (without it that one test is reported as Skipped); with GPUCMP_INSTALL_FUZZ=1 clang and
# its libFuzzer runtime (scripts/fuzz.sh). The CUDA toolkit must already be
# installed. Installs nothing when everything is present, so it also works offline.
set -euo pipefail

missing=()
have_cmake_package() {  # name: is a CMake config for it installed?
  local name=$1
  for dir in /usr/lib/cmake /usr/lib/*/cmake /usr/local/lib/cmake /usr/local/lib/*/cmake /usr/share/cmake /usr/local/share/cmake; do
    [ -e "$dir/$name" ] && return 0
  done
  return 1
}

command -v cmake >/dev/null || missing+=(cmake)
command -v ninja >/dev/null || missing+=(ninja-build)
have_cmake_package benchmark || missing+=(libbenchmark-dev)
have_cmake_package Catch2 || missing+=(catch2)
# One process per GPU (component gpucmp::mpi): Open MPI's compiler wrapper, headers and mpirun.
command -v mpicc >/dev/null || missing+=(libopenmpi-dev)
if [ "${GPUCMP_INSTALL_BROWSER:-0}" = 1 ] && ! command -v chromium >/dev/null && ! command -v chromium-browser >/dev/null; then
  missing+=(chromium)
fi

# The fuzz targets (scripts/fuzz.sh) need clang and its libFuzzer runtime.
if [ "${GPUCMP_INSTALL_FUZZ:-0}" = 1 ]; then
  command -v clang++ >/dev/null || missing+=(clang)
  if ! compgen -G "/usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a" >/dev/null; then
    missing+=(libclang-rt-dev)
  fi
fi

if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if ! command -v nvcc >/dev/null && [ ! -x /usr/local/cuda/bin/nvcc ]; then
  echo "install-deps: the CUDA toolkit (nvcc) was not found; install CUDA 12.x or 13.x first" >&2
  exit 1
fi
nvcc_bin=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
echo "install-deps: $(cmake --version | head -1), ninja $(ninja --version), $("$nvcc_bin" --version | grep -o "release [0-9.]*")"
