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
Writes rows {"key": "<collective>/nccl/fp32/<bytes>/out_of_place", "seconds", "algbw_GBps", "busbw_GBps"},
and with two or more GPUs "peer_copy_GBps": cuda:0 -> cuda:1 copies of 1 GiB (tensor.copy_,
cudaMemcpyPeer underneath), the P2P row's peer.
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


def peer_copy(size, windows):
    """cuda:0 -> cuda:1 copies of `size` bytes through PyTorch (cudaMemcpyPeer underneath): GB/s
    of the median window of 20 copies between CUDA events on the destination's stream."""
    src = torch.ones(size // 4, device="cuda:0")
    dst = torch.empty(size // 4, device="cuda:1")
    for _ in range(5):
        dst.copy_(src)
    torch.cuda.synchronize("cuda:0")
    torch.cuda.synchronize("cuda:1")
    with torch.cuda.device(1):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        per_copy = []
        for _ in range(windows):
            start.record()
            for _ in range(20):
                dst.copy_(src)
            stop.record()
            stop.synchronize()
            per_copy.append(start.elapsed_time(stop) * 1e-3 / 20)
    return size / statistics.median(per_copy) / 1e9


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
    if world >= 2:  # the P2P row's peer: PyTorch's peer copy of 1 GiB
        with open(args.out) as f:
            doc = json.load(f)
        doc["peer_copy_GBps"] = peer_copy(1 << 30, args.windows)
        print(f"torch_collectives: peer copy cuda:0 -> cuda:1, 1 GiB: {doc['peer_copy_GBps']:.1f} GB/s", flush=True)
        with open(args.out, "w") as f:
            json.dump(doc, f, indent=1)


if __name__ == "__main__":
    main()
