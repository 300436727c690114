#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: gpucmp contributors
# The multi-GPU issue's collective rows on one machine: gpucmp's collectives benchmark
# (all-reduce, all-gather, reduce-scatter in FP32, out of place, at 64 MiB, 1 GiB and 4 GiB,
# hot mode and graph) and torch_collectives.py (torch.distributed with NCCL, one process per
# GPU) on the same sizes, one after the other, data-parallel ResNet-50 training on one GPU and
# on all of them, the 1 GiB all-reduce again under mpirun (one process per GPU), the 8-card
# projection (project_cards.py), then lab/acceptance/multigpu.py's rows. NVLink multicast
# stays off (NCCL_NVLS_ENABLE=0).
#   scripts/multigpu/run-collectives-comparison.sh BUILD_DIR OUT_DIR
set -uo pipefail
build_dir=${1:?usage: run-collectives-comparison.sh BUILD_DIR OUT_DIR}
out_dir=${2:?usage: run-collectives-comparison.sh BUILD_DIR OUT_DIR}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
mkdir -p "$out_dir"
export NCCL_NVLS_ENABLE=0
status=0
nvidia-smi topo -m > "$out_dir/topology.txt" 2>&1 || true
"$build_dir/benchmarks/collectives" --collectives=all_reduce,all_gather,reduce_scatter --types=fp32 --placements=out_of_place \
  --min_bytes=67108864 --max_bytes=4294967296 --factor=4 \
  --benchmark_out="$out_dir/gpucmp_collectives.json" --benchmark_out_format=json > "$out_dir/gpucmp_collectives.txt" 2>&1 ||
  { echo "run-collectives-comparison: collectives failed"; tail -20 "$out_dir/gpucmp_collectives.txt"; status=1; }
# One process per GPU under MPI (built with gpucmp::mpi): the 1 GiB all-reduce again.
gpus=$(nvidia-smi -L 2>/dev/null | grep -c "^GPU")
if command -v mpirun >/dev/null && [ "$gpus" -ge 1 ]; then
  mpirun --allow-run-as-root --oversubscribe -np "$gpus" -x NCCL_NVLS_ENABLE "$build_dir/benchmarks/collectives" --mpi \
    --collectives=all_reduce --types=fp32 --placements=out_of_place --min_bytes=1073741824 --max_bytes=1073741824 \
    --benchmark_out="$out_dir/gpucmp_collectives_mpi.json" --benchmark_out_format=json > "$out_dir/gpucmp_collectives_mpi.txt" 2>&1 ||
    { echo "run-collectives-comparison: collectives under mpirun failed"; tail -20 "$out_dir/gpucmp_collectives_mpi.txt"; status=1; }
else
  echo "run-collectives-comparison: no mpirun here: the MPI row stays missing"
fi
python3 "$here/torch_collectives.py" --out "$out_dir/torch_collectives.json" > "$out_dir/torch_collectives.log" 2>&1 ||
  { echo "run-collectives-comparison: torch_collectives.py failed"; tail -20 "$out_dir/torch_collectives.log"; status=1; }
# The P2P matrix (its 1 GiB one-way 0 -> 1 copy is the peer-copy row).
"$build_dir/benchmarks/p2p_matrix" --matrix_out="$out_dir/p2p_matrix.md" \
  --benchmark_out="$out_dir/gpucmp_p2p.json" --benchmark_out_format=json > "$out_dir/gpucmp_p2p.txt" 2>&1 ||
  { echo "run-collectives-comparison: p2p_matrix failed"; tail -20 "$out_dir/gpucmp_p2p.txt"; status=1; }
# Data-parallel ResNet-50 AMP training at batch 256 per GPU: one GPU and every GPU.
"$build_dir/benchmarks/training" --precisions=amp_fp16 --batches=256 --data_parallel --benchmark_filter='/graph' \
  --benchmark_out="$out_dir/gpucmp_training_dp.json" --benchmark_out_format=json > "$out_dir/gpucmp_training_dp.txt" 2>&1 ||
  { echo "run-collectives-comparison: data-parallel training failed"; tail -20 "$out_dir/gpucmp_training_dp.txt"; status=1; }
# The seed-style 8-card table, projected from these measurements and the spec database.
"$build_dir/tools/report/gpucmp-report" compare "$out_dir/gpucmp_training_dp.json" --project a100_80gb_sxm,h100_sxm,l20,l40s \
  --csv "$out_dir/projection.csv" > "$out_dir/projection.log" 2>&1 &&
  python3 "$here/project_cards.py" "$root" "$out_dir" > "$out_dir/cards_projection.log" 2>&1 ||
  { echo "run-collectives-comparison: the 8-card projection failed"; tail -5 "$out_dir/cards_projection.log" "$out_dir/projection.log"; status=1; }
python3 "$root/lab/acceptance/multigpu.py" "$root" "$out_dir" || status=1
exit $status
