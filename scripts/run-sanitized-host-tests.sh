#!/usr/bin/env bash
# The host tests (units and the report tool, which reads untrusted files) built and run
# under AddressSanitizer (with LeakSanitizer) and UndefinedBehaviorSanitizer, in their own
# build folder (default: build-asan). No GPU is needed; CI runs it.
#   scripts/run-sanitized-host-tests.sh
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
build_dir=${BUILD_DIR_ASAN:-$repo_root/build-asan}
"$repo_root/scripts/install-deps.sh"
# Warnings are not errors here: under -fsanitize GCC 12 warns falsely inside libstdc++'s
# <regex> (maybe-uninitialized, through Catch2); the plain build holds warnings to -Werror.
# At -O1 -g, as the sanitizers' documentation advises (RelWithDebInfo's -O2 only costs build time).
# Linked --as-needed: the unit tests use nothing of cuDNN's NVRTC or of the CUDA driver, which
# CI has no libcuda.so.1 of; named NEEDED anyway, the binary would not load, the listing of its
# test cases would come back empty, and only the scripts' tests would run (as they did until
# 2026-12-06).
GPUCMP_EXTRA_CMAKE_ARGS="${GPUCMP_EXTRA_CMAKE_ARGS:-} -DGPUCMP_WERROR=OFF -DGPUCMP_SANITIZE=address,undefined -DGPUCMP_BUILD_TESTS=ON \
  -DGPUCMP_BUILD_EXAMPLES=OFF -DGPUCMP_BUILD_BENCHMARKS=OFF -DGPUCMP_BUILD_TOOLS=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -DCMAKE_CXX_FLAGS=-g -DCMAKE_EXE_LINKER_FLAGS=-Wl,--as-needed" \
  gpucmp_configure
gpucmp_build --target gpucmp_unit_tests gpucmp-report
# Leaks inside the CUDA libraries' own start-up (no driver here) are theirs, not ours.
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:strict_string_checks=1:detect_stack_use_after_return=1"
export LSAN_OPTIONS="suppressions=$repo_root/tests/sanitizers/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
cd "$build_dir"
# The unit test cases themselves, not only the scripts' tests: a binary that cannot be listed
# registers none.
units=$(ctest -N -L unit | grep -c "unit/" || true)
if [ "$units" -lt 100 ]; then
  echo "run-sanitized-host-tests: only $units unit test cases registered (gpucmp_unit_tests could not be listed?)" >&2
  exit 1
fi
ctest --output-on-failure --no-tests=error --parallel "$(nproc)" -L 'unit|report' -LE browser
