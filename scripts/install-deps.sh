#!/usr/bin/env bash
# Installs what gpucmp's build needs and the machine lacks: CMake >= 3.24, Ninja, Google
# Benchmark, Catch2 (v2 or v3) and Open MPI, from the distribution's packages; cudnn-frontend's
# headers (gpucmp::cudnn) from PyPI's nvidia-cudnn-frontend into /usr/local/include (as root)
# or ~/.local/include, unless CMake would find them already (CUDNN_FRONTEND_ROOT too);
# cuSPARSELt's header and library (gpucmp::cusparselt) from PyPI's nvidia-cusparselt-cu13 the
# same way (CUSPARSELT_ROOT); with
# GPUCMP_INSTALL_BROWSER=1 also Chromium, which the HTML report test renders the page in
# (without it that one test is reported as Skipped); with GPUCMP_INSTALL_FUZZ=1 clang and
# its libFuzzer runtime (scripts/fuzz.sh); Python's wheel package where an older setuptools
# needs it to install the Python reader (python/). The CUDA toolkit must already be
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

# Python's package folders (purelib, platlib, the user's site), one a line: where pip puts a
# wheel's files, and where CMake's find modules look.
python_sites() {
  command -v python3 >/dev/null || return 0
  python3 -c "import site, sysconfig; print('\n'.join({sysconfig.get_paths()['purelib'], sysconfig.get_paths()['platlib'], site.getusersitepackages()}))" 2>/dev/null
}
# Where unpacked wheels go: the system's prefix as root, the user's otherwise.
wheel_prefix=/usr/local
[ "$(id -u)" -eq 0 ] || wheel_prefix="$HOME/.local"
# unpack_wheel REQUIREMENT EXTRACTOR: downloads the one wheel REQUIREMENT names and runs the
# Python EXTRACTOR with the wheel's path and the prefix; fails (offline, say) without leaving
# anything behind.
unpack_wheel() {
  local wheel_dir status=0
  wheel_dir=$(mktemp -d)
  python3 -m pip download -q --no-deps --only-binary=:all: -d "$wheel_dir" "$1" &&
    python3 -c "$2" "$(ls "$wheel_dir"/*.whl)" "$wheel_prefix" || status=1
  rm -rf "$wheel_dir"
  return $status
}

# cudnn-frontend: header-only, so its headers are taken out of PyPI's wheel (any of its wheels
# holds the same include/ folder). Where CMake's FindCudnnFrontend looks, in the same order, and
# at least the version CMakeLists.txt asks for.
cudnn_frontend_version=1.32.0
recent_cudnn_frontend() {  # include folder: is its cudnn-frontend 1.32 or newer?
  [ -f "$1/cudnn_frontend.h" ] && awk '/define CUDNN_FRONTEND_MAJOR_VERSION/ {major = $3}
    /define CUDNN_FRONTEND_MINOR_VERSION/ {minor = $3}
    END {exit !(major > 1 || (major == 1 && minor >= 32))}' "$1/cudnn_frontend_version.h" 2>/dev/null
}
have_cudnn_frontend() {
  local dirs=("${CUDNN_FRONTEND_ROOT:-/nonexistent}/include") site
  while IFS= read -r site; do dirs+=("$site/include"); done < <(python_sites)
  dirs+=("${HOME:-/nonexistent}/.local/include" /usr/local/include /usr/include)
  for dir in "${dirs[@]}"; do
    recent_cudnn_frontend "$dir" && return 0
  done
  return 1
}
if ! have_cudnn_frontend; then
  echo "install-deps: installing cudnn-frontend $cudnn_frontend_version's headers into $wheel_prefix/include"
  if unpack_wheel "nvidia-cudnn-frontend==$cudnn_frontend_version" '
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    for name in z.namelist():
        if name.startswith("include/") and not name.endswith("/"):
            z.extract(name, sys.argv[2])'; then
    echo "install-deps: cudnn-frontend $cudnn_frontend_version installed"
  else
    echo "install-deps: could not install cudnn-frontend (offline?): gpucmp::cudnn will not be available;" \
         "set CUDNN_FRONTEND_ROOT to a folder holding include/cudnn_frontend.h" >&2
  fi
fi

# cuSPARSELt (gpucmp::cusparselt, 2:4 sparse GEMM): its header and library taken out of PyPI's
# nvidia-cusparselt-cu13 wheel, unless CMake's FindCUSPARSELT would find one already
# (CUSPARSELT_ROOT, the Python packages, the system).
cusparselt_version=0.10.0
have_cusparselt() {
  local dirs=("${CUSPARSELT_ROOT:-/nonexistent}") site
  while IFS= read -r site; do dirs+=("$site/nvidia/cu13" "$site/nvidia/cusparselt"); done < <(python_sites)
  dirs+=("${HOME:-/nonexistent}/.local" /usr/local /usr/local/cuda /usr)
  for dir in "${dirs[@]}"; do
    [ -f "$dir/include/cusparseLt.h" ] && compgen -G "$dir/lib*/libcusparseLt.so*" >/dev/null && return 0
  done
  compgen -G "/usr/include/*/cusparseLt.h" >/dev/null || compgen -G "/usr/include/libcusparseLt/*/cusparseLt.h" >/dev/null
}
if ! have_cusparselt; then
  echo "install-deps: installing cuSPARSELt $cusparselt_version into $wheel_prefix/include and $wheel_prefix/lib"
  # The wheel holds only libcusparseLt.so.0; the linker looks for libcusparseLt.so too.
  if unpack_wheel "nvidia-cusparselt-cu13==$cusparselt_version" '
import os, shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    for name in z.namelist():
        parts = name.split("/")
        if len(parts) >= 2 and parts[-2] in ("include", "lib") and parts[-1].startswith(("cusparseLt", "libcusparseLt")):
            target = os.path.join(sys.argv[2], parts[-2], parts[-1])
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with z.open(name) as source, open(target, "wb") as out:
                shutil.copyfileobj(source, out)
link = os.path.join(sys.argv[2], "lib", "libcusparseLt.so")
if not os.path.exists(link):
    os.symlink("libcusparseLt.so.0", link)'; then
    echo "install-deps: cuSPARSELt $cusparselt_version installed"
  else
    echo "install-deps: could not install cuSPARSELt (offline?): gpucmp::cusparselt will not be available;" \
         "set CUSPARSELT_ROOT to a folder holding include/cusparseLt.h and lib/libcusparseLt.so" >&2
  fi
fi

# The Python reader's install test (`pip install ./python` without network) builds a wheel with
# the installed setuptools, which before 70.1 needs the wheel package.
needs_wheel='import importlib.metadata as m, importlib.util as u, sys
v = tuple(int(x) for x in m.version("setuptools").split(".")[:2])
sys.exit(0 if u.find_spec("pip") and v < (70, 1) and not u.find_spec("wheel") else 1)'
if command -v python3 >/dev/null && python3 -c "$needs_wheel" 2>/dev/null; then
  python3 -m pip install -q wheel 2>/dev/null && echo "install-deps: installed Python's wheel package" ||
    echo "install-deps: could not install Python's wheel package (offline?): the Python reader's install test will be skipped" >&2
fi

if ! command -v nvcc >/dev/null && [ ! -x /usr/local/cuda/bin/nvcc ]; then
  echo "install-deps: the CUDA toolkit (nvcc) was not found; install CUDA 12.x or 13.x first" >&2
  exit 1
fi
nvcc_bin=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
echo "install-deps: $(cmake --version | head -1), ninja $(ninja --version), $("$nvcc_bin" --version | grep -o "release [0-9.]*")"
