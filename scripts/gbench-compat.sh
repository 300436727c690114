#!/usr/bin/env bash
# The Google Benchmark adapter against every Google Benchmark version gpucmp supports: the
# system's (Debian 12: 1.7.1; the H200 image: 1.8.3) and the sources in ../shared/third_party
# (v1.9.5 and a recent main), each built into build-gbench/VERSION. For each one it builds
# tests/gbench_compat (the adapter's host tests and a program that uses every registration
# macro and call, fixtures included), runs the host tests, and checks that the program
# registers exactly tests/gbench_compat/expected_list.txt. CI runs it. The table also goes to
# build-gbench/compat.md.
#   scripts/gbench-compat.sh [system] [TARBALL...]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
work=${BUILD_DIR_GBENCH:-$repo_root/build-gbench}
third_party=${GPUCMP_THIRD_PARTY:-$repo_root/../shared/third_party}
versions=("$@")
if [ ${#versions[@]} -eq 0 ]; then
  versions=(system)
  for t in "$third_party"/google-benchmark-*.tar.gz; do [ -e "$t" ] && versions+=("$t"); done
  if [ ${#versions[@]} -eq 1 ]; then
    echo "gbench-compat: no google-benchmark-*.tar.gz in $third_party (set GPUCMP_THIRD_PARTY)" >&2
    exit 1
  fi
fi
"$repo_root/scripts/install-deps.sh" >/dev/null
mkdir -p "$work"
table="| Google Benchmark | host tests | registrations | run |
|---|---|---|---|"
status=0
for v in "${versions[@]}"; do
  prefix_args=()
  name=system
  if [ "$v" != system ]; then
    name=$(basename "$v" .tar.gz | sed 's/^google-benchmark-//')
    prefix="$work/$name/prefix"
    if [ ! -e "$prefix/.installed" ]; then
      rm -rf "$work/$name/src" && mkdir -p "$work/$name/src"
      tar xzf "$v" -C "$work/$name/src" --strip-components=1
      cmake -S "$work/$name/src" -B "$work/$name/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
        -DBENCHMARK_ENABLE_TESTING=OFF -DBENCHMARK_ENABLE_GTEST_TESTS=OFF -DBENCHMARK_ENABLE_WERROR=OFF >/dev/null
      cmake --build "$work/$name/build" --parallel "$(nproc)" >/dev/null
      cmake --install "$work/$name/build" --prefix "$prefix" >/dev/null
      touch "$prefix/.installed"
    fi
    prefix_args=(-DCMAKE_PREFIX_PATH="$prefix" -Dbenchmark_DIR="$(dirname "$(find "$prefix" -name benchmarkConfig.cmake | head -1)")")
  fi
  build="$work/$name/compat"
  cmake -S "$repo_root/tests/gbench_compat" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "${prefix_args[@]}" \
    | grep "gbench-compat:" || true
  cmake --build "$build" --parallel "$(nproc)" >/dev/null
  host=PASS
  "$build/gbench_compat_host_tests" > "$build/host_tests.log" 2>&1 || { host=FAIL; status=1; tail -20 "$build/host_tests.log"; }
  listed=PASS
  "$build/gbench_compat_registrations" --benchmark_list_tests=true > "$build/list.txt" 2>/dev/null || true
  if ! diff -u "$repo_root/tests/gbench_compat/expected_list.txt" "$build/list.txt"; then listed=FAIL; status=1; fi
  # A run: 77 without a GPU (every benchmark skipped, saying why), 0 with one.
  ran=0
  "$build/gbench_compat_registrations" > "$build/run.txt" 2>&1 || ran=$?
  run="exit $ran"
  if [ "$ran" != 0 ] && [ "$ran" != 77 ]; then run="$run FAIL"; status=1; tail -20 "$build/run.txt"; fi
  table+="
| $name | $host | $listed | $run |"
done
echo "$table"
echo "$table" > "$work/compat.md"  # for lab/acceptance/architecture.py
exit $status
