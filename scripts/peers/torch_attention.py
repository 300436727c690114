#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: gpucmp contributors
"""PyTorch's scaled_dot_product_attention on benchmarks/attention_sweep's shapes, each backend.

usage: torch_attention.py OUT.json [--shapes REGEX]

For every shape of the sweep (the same list, the same BSHD memory layout: each token's heads
side by side, viewed as (batch, heads, seq, head_dim) as a transformer layer passes them),
F.scaled_dot_product_attention with each backend PyTorch has here (cuDNN, flash, efficient),
timed as CUDA-graph replays with torch_ops.time_graph (the timing gpucmp's comparison scripts
share). A backend that refuses a shape is recorded with its reason. Grouped-query shapes pass
enable_gqa=True. Writes {"torch", "cudnn", "rows": [{"key", "backend", "seconds", "flops"}]};
FLOPs counted as gpucmp counts them (causal: half the square).
"""
import argparse
import json
import os
import re
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_ops import time_graph  # noqa: E402

# benchmarks/attention_sweep.cu's shapes: (batch, seq, q heads, kv heads, head dim).
SHAPES = [(1, 8192, 32, 32, 128), (4, 4096, 32, 32, 128), (16, 1024, 32, 32, 128),
          (4, 4096, 32, 8, 128), (4, 4096, 64, 64, 64), (4, 4096, 16, 16, 256)]
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
BACKENDS = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION,
            "efficient": SDPBackend.EFFICIENT_ATTENTION}


def key(dtype, batch, seq, hq, hkv, d, causal):
    heads = f"h{hq}" + (f"+{hkv}" if hkv != hq else "")
    return f"attention/cudnn/{dtype}/b{batch}_s{seq}_{heads}_d{d}/{'causal' if causal else 'full'}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out")
    parser.add_argument("--shapes", default=".*", help="only keys matching this regex")
    parser.add_argument("--calls", type=int, default=10, help="calls per graph replay")
    args = parser.parse_args()
    rows = []
    for dtype_name, dtype in DTYPES.items():
        for causal in (True, False):
            for batch, seq, hq, hkv, d in SHAPES:
                k = key(dtype_name, batch, seq, hq, hkv, d, causal)
                if not re.search(args.shapes, k):
                    continue
                # BSHD storage viewed as (batch, heads, seq, d), as gpucmp stores them.
                q = (torch.rand(batch, seq, hq, d, device="cuda") * 2 - 1).to(dtype).transpose(1, 2)
                kk = (torch.rand(batch, seq, hkv, d, device="cuda") * 2 - 1).to(dtype).transpose(1, 2)
                v = (torch.rand(batch, seq, hkv, d, device="cuda") * 2 - 1).to(dtype).transpose(1, 2)
                flops = 4.0 * batch * hq * seq * seq * d * (0.5 if causal else 1.0)
                for name, backend in BACKENDS.items():
                    def call(backend=backend):
                        with sdpa_kernel(backend):
                            return F.scaled_dot_product_attention(q, kk, v, is_causal=causal, enable_gqa=hq != hkv)
                    try:
                        call()
                        torch.cuda.synchronize()
                        seconds = time_graph(call, args.calls, 10)
                        rows.append({"key": k, "backend": name, "seconds": seconds, "flops": flops})
                        print(f"{k} {name}: {flops / seconds / 1e12:.0f} TFLOP/s", flush=True)
                    except Exception as e:  # a backend that refuses the shape
                        rows.append({"key": k, "backend": name, "seconds": None, "flops": flops, "refused": str(e)[:200]})
                        print(f"{k} {name}: refused: {str(e)[:120]}", flush=True)
                del q, kk, v
    out = {"torch": torch.__version__, "cudnn": torch.backends.cudnn.version(), "gpu": torch.cuda.get_device_name(),
           "rows": rows}
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
