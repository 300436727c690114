#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: gpucmp contributors
"""How one 8192^3 GEMM's time per call changes over the first seconds of full load.

For each precision: the call torch_ops.py times, captured `--calls` times into a CUDA graph,
idle `--cooldown` seconds, then replayed back to back for `--seconds`, each replay between two
events (as torch_ops.py times it). Prints the median time per call in windows since the load
began, so one can see whether a short measurement right after idle reads faster than a long
one: under a power cap the GPU's power limiter takes a while to pull the clocks down, and
two harnesses that time different parts of that transient disagree about the same kernel.

Usage: sustained_timeline.py --out timeline.json [--only fp16,fp8_e5m2] [--seconds 4]
Writes {"<key>": [[seconds since the load began, seconds per call], ...], ...}.
"""
import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402
import torch_ops  # noqa: E402

SIZE = 8192
# Windows (seconds since the first timed replay began) the summary reports.
WINDOWS = [(0.0, 0.2), (0.2, 0.5), (0.5, 1.0), (1.0, 2.0), (2.0, 4.0), (4.0, 1e9)]


def call_for(name):
    if name.startswith("fp8"):
        return f"gemm/{name}/{SIZE}x{SIZE}x{SIZE}_tn", torch_ops.fp8_call(SIZE, name)
    return f"gemm/{name}/{SIZE}x{SIZE}x{SIZE}", torch_ops.gemm_call(SIZE, SIZE, SIZE, False, False, name)


def timeline(fn, calls, cooldown, seconds):
    """[(seconds since the load began, seconds per call)] of back-to-back graph replays."""
    graph = torch_ops.capture_graph(fn, calls)
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    time.sleep(cooldown)
    points = []
    began = elapsed = 0.0
    while elapsed < seconds:
        start.record()
        graph.replay()
        stop.record()
        stop.synchronize()
        replay_s = start.elapsed_time(stop) * 1e-3
        points.append((elapsed, replay_s / calls))
        elapsed += replay_s  # GPU time under load; the host's sync gaps are microseconds
    del graph
    return points


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("--only", default="tf32,fp16,bf16,fp8_e4m3,fp8_e5m2")
    parser.add_argument("--calls", type=int, default=10, help="calls per graph replay (as the comparison)")
    parser.add_argument("--cooldown", type=float, default=2.0, help="idle seconds before the load")
    parser.add_argument("--seconds", type=float, default=4.0, help="seconds of load per precision")
    args = parser.parse_args()
    result = {}
    for name in args.only.split(","):
        key, fn = call_for(name)
        points = timeline(fn, args.calls, args.cooldown, args.seconds)
        result[key] = points
        cells = []
        for lo, hi in WINDOWS:
            inside = [per_call for t, per_call in points if lo <= t < hi]
            if inside:
                label = f"{lo:g}-{hi:g} s" if hi < 1e9 else f">{lo:g} s"
                cells.append(f"{label}: {statistics.median(inside) * 1e6:.1f} us")
        print(f"{key}: " + ", ".join(cells), flush=True)
        del fn
        torch.backends.cuda.matmul.allow_tf32 = False
    with open(args.out, "w") as f:
        json.dump(result, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
