#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: gpucmp contributors
"""PyTorch's decode GEMV (x @ W.T through F.linear) on benchmarks/gemv_sweep's shapes.

usage: torch_gemv.py OUT.json [--shapes REGEX]

Llama-3-8B's five decode GEMVs at 1 to 64 tokens, BF16, as a decoder calls them: F.linear(x, W)
with W (out x in) row-major, timed as CUDA-graph replays with torch_ops.time_graph (the timing
gpucmp's comparison scripts share), and at 1 and 8 tokens also cold, L2 flushed before every
call (torch_ops.time_cold, as gpucmp's cold rows). Writes {"torch", "gpu", "rows": [{"key",
"seconds"}]}, keys named as gpucmp names its rows (gemv/bf16/b<tokens>_n<out>_k<in>, /cold
appended for a cold row), for scripts/bandwidth-fraction.py --peer.
"""
import argparse
import json
import os
import re
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_ops import time_cold, time_graph  # noqa: E402

# benchmarks/gemv_sweep.cu's shapes: Llama-3-8B's (out features, in features), and its token counts.
SHAPES = [(6144, 4096), (4096, 4096), (28672, 4096), (4096, 14336), (128256, 4096)]
BATCHES = [1, 2, 4, 8, 16, 32, 64]
COLD_BATCHES = [1, 8]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out")
    parser.add_argument("--shapes", default=".*", help="only keys matching this regex")
    parser.add_argument("--calls", type=int, default=20, help="calls per graph replay")
    args = parser.parse_args()
    rows = []
    with torch.no_grad():
        for n, k in SHAPES:
            w = (torch.rand(n, k, device="cuda") * 2 - 1).to(torch.bfloat16)
            for batch in BATCHES:
                key = f"gemv/bf16/b{batch}_n{n}_k{k}"
                if not re.search(args.shapes, key):
                    continue
                x = (torch.rand(batch, k, device="cuda") * 2 - 1).to(torch.bfloat16)
                timings = [(key, time_graph(lambda x=x: F.linear(x, w), args.calls, 10))]
                if batch in COLD_BATCHES:
                    timings.append((key + "/cold", time_cold(lambda x=x: F.linear(x, w), 10)))
                for name, seconds in timings:
                    rows.append({"key": name, "seconds": seconds})
                    print(f"{name}: {2.0 * n * k / seconds / 1e9:.0f} GB/s of weights", flush=True)
            del w
    out = {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(), "rows": rows}
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
