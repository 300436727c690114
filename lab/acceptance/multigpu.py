#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: gpucmp contributors
"""The multi-GPU issue's acceptance rows, from one run-collectives-comparison.sh folder.

Reads OUT_DIR/gpucmp_collectives.json (gpucmp's typed rows: the declared bytes S and the
time; busbw from nccl-tests' factor and the rank count the counters hold) and
torch_collectives.json; writes OUT_DIR/acceptance.json and summary.md (lab/acceptance/acceptance_rows.py).
gpucmp's rate per size is the faster of its hot and graph rows. The data-parallel row reads
gpucmp_training_dp.json (benchmarks/training --data_parallel: one GPU's graph row and the
x<GPUs> one); the peer-copy row reads gpucmp_p2p.json (benchmarks/p2p_matrix) against
torch_collectives.json's peer_copy_GBps. The mpirun row reads gpucmp_collectives_mpi.json
(`mpirun -np N collectives --mpi`: one process per GPU) against the single-process rows, the
all-reduce's algbw counters at 1 GiB (under MPI, from the slowest rank's median).
Usage: acceptance.py REPO_ROOT OUT_DIR
"""
import json
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)  # acceptance_rows
sys.path.insert(0, os.path.join(here, "..", "..", "python"))  # gpucmp_results, the one reader of gpucmp's files
import gpucmp_results  # noqa: E402
from acceptance_rows import Rows  # noqa: E402

FACTORS = {"all_reduce": lambda n: 2 * (n - 1) / n, "all_gather": lambda n: (n - 1) / n, "reduce_scatter": lambda n: (n - 1) / n}
SIZES = (64 << 20, 1 << 30, 4 << 30)


def algbw_counters(path):
    """{"<collective>/nccl/<type>/<bytes>/<placement>": the best algbw_GBps counter over the modes}."""
    best = {}
    for name, counters in gpucmp_results.load(path).benchmarks.items():
        if "algbw_GBps" not in counters:
            continue
        key = "/".join(name.split("/")[:5])
        best[key] = max(best.get(key, 0.0), float(counters["algbw_GBps"]))
    return best


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    out = sys.argv[2]
    rows = Rows()
    ours = {}
    path = os.path.join(out, "gpucmp_collectives.json")
    ranks = None
    if os.path.exists(path):
        result = gpucmp_results.load(path)
        for bench, runs in result.by_benchmark().items():
            ok = sorted(r.seconds for r in runs if r.ok)
            if not ok:
                continue
            counters = next((b for name, b in result.benchmarks.items() if name == bench or name.startswith(bench + "/")), {})
            ranks = int(counters.get("ranks", 0)) or ranks
            key = bench.rsplit("/", 1)[0]  # without the mode
            algbw = runs[0].bytes_read / ok[len(ok) // 2]
            ours[key] = max(ours.get(key, 0), algbw)
    theirs = {}
    path = os.path.join(out, "torch_collectives.json")
    if os.path.exists(path):
        doc = json.load(open(path))
        theirs = {r["key"]: r["busbw_GBps"] for r in doc["rows"]}
        ranks = ranks or doc.get("ranks")
    for collective in FACTORS:
        for size in SIZES:
            key = f"{collective}/nccl/fp32/{size}/out_of_place"
            name = f"{collective} busbw at {size >> 20} MiB: gpucmp / torch.distributed (NCCL)"
            mine = ours.get(key)
            if mine is None or theirs.get(key) is None or not ranks or ranks < 2:
                rows.add(name, "missing" if ranks is None or ranks >= 2 else "n/a: one GPU", ">= 1.0", "x", False)
                continue
            busbw = mine * FACTORS[collective](ranks) / 1e9
            rows.add(name, round(busbw / theirs[key], 3), ">= 1.0", "x", busbw >= theirs[key])
    # Data-parallel scaling: the x<GPUs> graph row's images/s against the GPUs times one GPU's.
    name = "data-parallel ResNet-50 AMP at batch 256 per GPU: scaling efficiency over the GPUs"
    path = os.path.join(out, "gpucmp_training_dp.json")
    efficiency = None
    if os.path.exists(path):
        rates = {}
        for bench, runs in gpucmp_results.load(path).by_benchmark().items():
            ok = sorted(r.seconds for r in runs if r.ok)
            if ok and runs[0].items:
                rates[bench] = runs[0].items / ok[len(ok) // 2]
        single = rates.get("train/resnet50/amp_fp16/bs256/graph")
        multi = [(int(b.split("/x")[1].split("/")[0]), v) for b, v in rates.items()
                 if b.startswith("train/resnet50/amp_fp16/bs256/x") and b.endswith("/graph")]
        if single and multi and multi[0][0] >= 2:
            gpus, rate = multi[0]
            efficiency = rate / (gpus * single)
            name += f" ({gpus} GPUs: {rate:,.0f} img/s against {single:,.0f} on one)"
    rows.add(name, round(100 * efficiency, 1) if efficiency else "missing", ">= 95", "%", bool(efficiency and efficiency >= 0.95))
    # Peer copy: p2p_matrix's memcpy_peer 0 -> 1 one-way 1 GiB row against PyTorch's copy.
    name = "peer copy 0 -> 1, 1 GiB: gpucmp (p2p_matrix, cudaMemcpyPeerAsync) / PyTorch's peer copy"
    path = os.path.join(out, "gpucmp_p2p.json")
    mine = None
    if os.path.exists(path):
        for bench, runs in gpucmp_results.load(path).by_benchmark().items():
            ok = sorted(r.seconds for r in runs if r.ok)
            if ok and bench.startswith("p2p/memcpy_peer/0_1/1073741824/one_way"):
                mine = runs[0].bytes_read / ok[len(ok) // 2] / 1e9
    theirs_copy = json.load(open(os.path.join(out, "torch_collectives.json"))).get("peer_copy_GBps") if os.path.exists(
        os.path.join(out, "torch_collectives.json")) else None
    if mine and theirs_copy:
        rows.add(name + f" ({mine:.1f} against {theirs_copy:.1f} GB/s)", round(mine / theirs_copy, 3), ">= 0.98", "x",
                 mine >= 0.98 * theirs_copy)
    else:
        rows.add(name, "missing", ">= 0.98", "x", False)
    # One process per GPU under MPI against one process for every GPU: the same collective.
    name = "mpirun -np 2 (one process per GPU): all_reduce 1 GiB busbw against the single-process run"
    single_path, mpi_path = os.path.join(out, "gpucmp_collectives.json"), os.path.join(out, "gpucmp_collectives_mpi.json")
    key = f"all_reduce/nccl/fp32/{1 << 30}/out_of_place"
    single = algbw_counters(single_path).get(key) if os.path.exists(single_path) else None
    under_mpi = algbw_counters(mpi_path).get(key) if os.path.exists(mpi_path) else None
    if single and under_mpi:
        ratio = under_mpi / single  # busbw's factor is the same in both: the ratio of algbw
        rows.add(name + f" ({under_mpi:.1f} against {single:.1f} GB/s algbw)", round(ratio, 4), "within 2 %", "x",
                 abs(ratio - 1) <= 0.02)
    else:
        rows.add(name, "missing", "within 2 %", "x", False)
    rows.write(out)
    return 0 if all(r["pass"] for r in rows.rows) else 1


if __name__ == "__main__":
    sys.exit(main())
