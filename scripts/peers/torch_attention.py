#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: gpucmp contributors
"""PyTorch's scaled_dot_product_attention on benchmarks/attention_sweep's shapes, each backend.

usage: torch_attention.py OUT.json [--shapes REGEX] [--passes fwd,bwd]

For every shape of the sweep (the same list, the same BSHD memory layout: each token's heads
side by side, viewed as (batch, heads, seq, head_dim) as a transformer layer passes them),
F.scaled_dot_product_attention with each backend PyTorch has here (cuDNN, flash, efficient),
timed as CUDA-graph replays with torch_ops.time_graph (the timing gpucmp's comparison scripts
share). The backward (key ending /bwd) is the forward and torch.autograd.grad of Q, K and V,
less the training forward alone (gpucmp's backward row likewise starts from a forward's O and
statistics), both timed eagerly with CUDA events around back-to-back calls (time_eager): a
graph capture of autograd's backward is invalidated on PyTorch 2.11 (cudaErrorStreamCapture-
Invalidated on an H100), and at these sizes a call's milliseconds of GPU work hide its launch. A backend that refuses a shape is recorded with its reason.
Grouped-query shapes pass enable_gqa=True. Writes {"torch", "cudnn", "rows": [{"key",
"backend", "seconds", "flops"}]}; FLOPs counted as gpucmp counts them (causal: half the square;
backward 2.5 times the forward's).
"""
import argparse
import json
import os
import re
import statistics
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


def key(dtype, batch, seq, hq, hkv, d, causal, backward=False):
    heads = f"h{hq}" + (f"+{hkv}" if hkv != hq else "")
    k = f"attention/cudnn/{dtype}/b{batch}_s{seq}_{heads}_d{d}/{'causal' if causal else 'full'}"
    return k + "/bwd" if backward else k


def time_eager(fn, calls, repetitions=10, min_seconds=0.1):
    """Median seconds per call of fn() run `calls` times back to back between CUDA events,
    after three warm-up calls; at least `repetitions` pairs and `min_seconds` of GPU time."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    per_call, total = [], 0.0
    while len(per_call) < repetitions or total < min_seconds:
        start.record()
        for _ in range(calls):
            fn()
        stop.record()
        stop.synchronize()
        seconds = start.elapsed_time(stop) * 1e-3
        per_call.append(seconds / calls)
        total += seconds
    return statistics.median(per_call)


def measure(rows, k, name, flops, fn, calls, timer=None):
    """Appends fn's seconds per call (timer: time_graph's by default) under k to rows (or why
    the backend refused it) and returns the seconds (None when refused)."""
    try:
        fn()
        torch.cuda.synchronize()
        seconds = timer(fn, calls) if timer else time_graph(fn, calls, 10)
        rows.append({"key": k, "backend": name, "seconds": seconds, "flops": flops})
        print(f"{k} {name}: {flops / seconds / 1e12:.0f} TFLOP/s", flush=True)
        return seconds
    except Exception as e:  # a backend that refuses the shape
        rows.append({"key": k, "backend": name, "seconds": None, "flops": flops, "refused": str(e)[:200]})
        print(f"{k} {name}: refused: {str(e)[:120]}", flush=True)
        return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out")
    parser.add_argument("--shapes", default=".*", help="only keys matching this regex")
    parser.add_argument("--calls", type=int, default=10, help="calls per graph replay")
    parser.add_argument("--passes", default="fwd,bwd", help="fwd, bwd or both, comma-separated")
    args = parser.parse_args()
    passes = set(args.passes.split(","))
    rows = []
    for dtype_name, dtype in DTYPES.items():
        for causal in (True, False):
            for batch, seq, hq, hkv, d in SHAPES:
                k = key(dtype_name, batch, seq, hq, hkv, d, causal)
                wanted = {p for p in passes
                          if re.search(args.shapes, key(dtype_name, batch, seq, hq, hkv, d, causal, p == "bwd"))}
                if not wanted:
                    continue
                # BSHD storage viewed as (batch, heads, seq, d), as gpucmp stores them.
                def tensor(heads):
                    t = (torch.rand(batch, seq, heads, d, device="cuda") * 2 - 1).to(dtype)
                    return t.requires_grad_("bwd" in wanted).transpose(1, 2)
                q, kk, v = tensor(hq), tensor(hkv), tensor(hkv)
                dout = (torch.rand(batch, seq, hq, d, device="cuda") * 2 - 1).to(dtype).transpose(1, 2)
                flops = 4.0 * batch * hq * seq * seq * d * (0.5 if causal else 1.0)
                for name, backend in BACKENDS.items():
                    def forward(backend=backend):
                        with sdpa_kernel(backend):
                            return F.scaled_dot_product_attention(q, kk, v, is_causal=causal, enable_gqa=hq != hkv)

                    def forward_backward(forward=forward):
                        return torch.autograd.grad(forward(), (q, kk, v), dout)
                    if "fwd" in wanted:
                        with torch.no_grad():  # inference: no statistics kept for a backward
                            measure(rows, k, name, flops, forward, args.calls)
                    if "bwd" in wanted:
                        # Less the forward as training runs it (statistics kept), with grad enabled.
                        fwd = measure([], k + " (training forward)", name, flops, forward, args.calls, time_eager)
                        both = (measure([], k + " (forward and backward)", name, 3.5 * flops, forward_backward,
                                        args.calls, time_eager) if fwd else None)
                        kb = key(dtype_name, batch, seq, hq, hkv, d, causal, True)
                        if both and both > fwd:
                            rows.append({"key": kb, "backend": name, "seconds": both - fwd, "flops": 2.5 * flops})
                            print(f"{kb} {name}: {2.5 * flops / (both - fwd) / 1e12:.0f} TFLOP/s", flush=True)
                        else:
                            rows.append({"key": kb, "backend": name, "seconds": None, "flops": 2.5 * flops,
                                         "refused": "backward not timed: the backend refused the forward or backward"})
                del q, kk, v, dout
    out = {"torch": torch.__version__, "cudnn": torch.backends.cudnn.version(), "gpu": torch.cuda.get_device_name(),
           "rows": rows}
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
