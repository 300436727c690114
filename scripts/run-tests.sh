#!/usr/bin/env bash
# Installs what is missing (Chromium included, for the HTML report test), builds gpucmp with
# its tests and runs them with CTest. Without a GPU the [gpu] tests and examples are
# reported as Skipped. It sets every cache option it depends on, so it runs every test
# whatever ran in the build folder before (run-benchmarks.sh included), and CTest fails
# when it finds no test.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
GPUCMP_INSTALL_BROWSER=1 "$repo_root/scripts/install-deps.sh"
GPUCMP_EXTRA_CMAKE_ARGS="${GPUCMP_EXTRA_CMAKE_ARGS:-} -DGPUCMP_BUILD_TESTS=ON -DGPUCMP_BUILD_EXAMPLES=ON \
  -DGPUCMP_BUILD_BENCHMARKS=ON -DGPUCMP_BUILD_TOOLS=ON" gpucmp_configure
gpucmp_build
cd "$build_dir"
ctest --output-on-failure --no-tests=error --parallel "$(nproc)" "$@"
