#!/usr/bin/env bash
# On a GPU machine: which host call waits for a held stream, plainly and under each
# compute-sanitizer tool (hold_probe.cu says why). Writes OUT_DIR/hold_probe.md.
#   lab/probes/hold-probe.sh OUT_DIR [TIMEOUT_S]
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/common.sh"
out_dir=${1:?usage: hold-probe.sh OUT_DIR [TIMEOUT_S]}
timeout_s=${2:-3}
mkdir -p "$out_dir"
arch=${CMAKE_CUDA_ARCHITECTURES:-$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d '.')}
nvcc=${CUDACXX:-/usr/local/cuda/bin/nvcc}
probe="$out_dir/hold_probe"
"$nvcc" -std=c++17 -O2 -arch="sm_$arch" -I"$repo_root/include" "$repo_root/lab/probes/hold_probe.cu" -o "$probe" ||
  { echo "hold-probe: build failed" >&2; exit 1; }
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
report="$out_dir/hold_probe.md"
{
  echo "# Host calls behind a held stream ($(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1))"
  echo
  echo "\`lab/probes/hold-probe.sh OUT $timeout_s\`; $("$sanitizer" --version 2>&1 | tail -1)"
} > "$report"
status=0
run() {  # title, command...
  local title=$1; shift
  { echo; echo "## $title"; echo; echo '```'; } >> "$report"
  timeout 300 "$@" "$timeout_s" >> "$report" 2>&1 || { echo "(exit $?)" >> "$report"; status=1; }
  echo '```' >> "$report"
}
run "no tool" "$probe"
for tool in memcheck racecheck synccheck initcheck; do
  run "$tool" "$sanitizer" --tool "$tool" "$probe"
done
run "initcheck, CUDA_MODULE_LOADING=EAGER" env CUDA_MODULE_LOADING=EAGER "$sanitizer" --tool initcheck "$probe"
run "initcheck, CUDA_MODULE_LOADING=EAGER, --check-api-memory-access no" env CUDA_MODULE_LOADING=EAGER "$sanitizer" \
  --tool initcheck --check-api-memory-access no "$probe"
"$sanitizer" --help > "$out_dir/compute-sanitizer-help.txt" 2>&1
cat "$report"
exit $status
