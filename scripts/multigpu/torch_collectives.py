#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: gpucmp contributors
"""Times torch.distributed's NCCL collectives the way benchmarks/collectives times gpucmp's,
one process per GPU (the peer the multi-GPU issue compares with).

all_reduce, all_gather_into_tensor and reduce_scatter_tensor in FP32, out of place (all-reduce
in place, torch's only form, counted as out of place), at nccl-tests' sizes (the whole array
for all-gather and reduce-scatter). Per size: 5 warm-up calls, then `--windows` windows of 20
calls between CUDA events; each window's time is the slowest rank's (an all-reduce MAX over
the ranks), the median window kept. busbw uses nccl-tests' factors. NVLink multicast stays off
(NCCL_NVLS_ENABLE=0).
Usage: torch_collectives.py --out torch_collectives.json [--sizes 67108864,1073741824,4294967296]
Writes rows {"key": "<collective>/nccl/fp32/<bytes>/out_of_place", "seconds", "algbw_GBps", "busbw_GBps"}.
"""
import argparse
import json
import os
import statistics

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

FACTORS = {"all_reduce": lambda n: 2 * (n - 1) / n, "all_gather": lambda n: (n - 1) / n, "reduce_scatter": lambda n: (n - 1) / n}


def worker(rank, world, sizes, windows, out, port):
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world)
    rows = []
    for collective in ("all_reduce", "all_gather", "reduce_scatter"):
        for size in sizes:
            whole = collective != "all_reduce"
            count = size // 4 // (world if whole else 1)
            if collective == "all_reduce":
                x = torch.ones(count, device="cuda")
                call = lambda: dist.all_reduce(x)  # noqa: E731
            elif collective == "all_gather":
                x, y = torch.ones(count, device="cuda"), torch.empty(count * world, device="cuda")
                call = lambda: dist.all_gather_into_tensor(y, x)  # noqa: E731
            else:
                x, y = torch.ones(count * world, device="cuda"), torch.empty(count, device="cuda")
                call = lambda: dist.reduce_scatter_tensor(y, x)  # noqa: E731
            for _ in range(5):
                call()
            torch.cuda.synchronize()
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            per_call = []
            for _ in range(windows):
                dist.barrier()
                start.record()
                for _ in range(20):
                    call()
                stop.record()
                stop.synchronize()
                t = torch.tensor([start.elapsed_time(stop) * 1e-3 / 20], device="cuda")
                dist.all_reduce(t, op=dist.ReduceOp.MAX)
                per_call.append(t.item())
            seconds = statistics.median(per_call)
            algbw = size / seconds
            busbw = algbw * FACTORS[collective](world) if world > 1 else None
            rows.append({"key": f"{collective}/nccl/fp32/{size}/out_of_place", "seconds": seconds, "algbw_GBps": algbw / 1e9,
                         "busbw_GBps": busbw / 1e9 if busbw else None})
            if rank == 0:
                print(f"torch_collectives: {collective} {size} B: algbw {algbw / 1e9:.1f} GB/s, busbw "
                      f"{busbw / 1e9 if busbw else float('nan'):.1f} GB/s", flush=True)
            del x
            torch.cuda.empty_cache()
    if rank == 0:
        with open(out, "w") as f:
            json.dump({"torch": torch.__version__, "nccl": ".".join(map(str, torch.cuda.nccl.version())), "ranks": world,
                       "rows": rows}, f, indent=1)
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--sizes", default="67108864,1073741824,4294967296")
    parser.add_argument("--windows", type=int, default=5)
    parser.add_argument("--port", type=int, default=29517)
    args = parser.parse_args()
    world = torch.cuda.device_count()
    if world < 1:
        raise SystemExit("torch_collectives: no CUDA device")
    sizes = [int(s) for s in args.sizes.split(",")]
    mp.spawn(worker, args=(world, sizes, args.windows, args.out, args.port), nprocs=world, join=True)


if __name__ == "__main__":
    main()
