#!/usr/bin/env bash
# Installs what is missing (Chromium included, for the HTML report test), builds gpucmp with
# its tests and runs them with CTest. Without a GPU the [gpu] tests and examples are
# reported as Skipped.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
GPUCMP_INSTALL_BROWSER=1 "$repo_root/scripts/install-deps.sh"
gpucmp_configure
gpucmp_build
cd "$build_dir"
ctest --output-on-failure --parallel "$(nproc)" "$@"
