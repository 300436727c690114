#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: gpucmp contributors
"""PyTorch's scaled_dot_product_attention on decode steps: one query token a sequence.

usage: torch_decode_attention.py OUT.json [--batches 1,8,64] [--contexts 1024,4096,16384,32768]
                                 [--dtype bf16] [--calls 20]

Llama-3-8B's heads (32 query heads over 8 KV heads of 128), K and V contiguous in BSHD as a
cache holds them, the full mask, forward only: the decode rows of benchmarks/attention_sweep
(whose K and V sit in pages instead; PyTorch's SDPA takes no page table). Each backend PyTorch
has here (cuDNN, flash, efficient), timed as CUDA-graph replays with torch_ops.time_graph, so
the backends are compared with each other in one run; a backend that refuses a shape is
recorded with its reason. Writes {"torch", "cudnn", "gpu", "rows": [{"key", "backend",
"seconds", "kv_bytes"}]}; key as gpucmp names the contiguous row
(attention/cudnn/bf16/b1_s1x1024_h32+8_d128/full); kv_bytes: K and V read.
"""
import argparse
import json
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_ops import time_graph  # noqa: E402

BACKENDS = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION,
            "efficient": SDPBackend.EFFICIENT_ATTENTION}
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
Q_HEADS, KV_HEADS, HEAD_DIM = 32, 8, 128


def numbers(text, what):
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        sys.exit(f"torch_decode_attention: --{what} takes comma-separated whole numbers, got '{text}'")
    if not values or min(values) < 1:
        sys.exit(f"torch_decode_attention: --{what} takes positive numbers, got '{text}'")
    return values


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out")
    parser.add_argument("--batches", default="1,8,64")
    parser.add_argument("--contexts", default="1024,4096,16384,32768")
    parser.add_argument("--dtype", default="bf16", choices=sorted(DTYPES))
    parser.add_argument("--calls", type=int, default=20, help="calls per graph replay")
    args = parser.parse_args()
    dtype = DTYPES[args.dtype]
    rows = []
    for batch in numbers(args.batches, "batches"):
        for context in numbers(args.contexts, "contexts"):
            key = f"attention/cudnn/{args.dtype}/b{batch}_s1x{context}_h{Q_HEADS}+{KV_HEADS}_d{HEAD_DIM}/full"

            def bshd(tokens, heads):  # stored BSHD, viewed as (batch, heads, tokens, d)
                return ((torch.rand(batch, tokens, heads, HEAD_DIM, device="cuda") * 2 - 1).to(dtype)).transpose(1, 2)
            q, k, v = bshd(1, Q_HEADS), bshd(context, KV_HEADS), bshd(context, KV_HEADS)
            kv_bytes = 2.0 * k.numel() * k.element_size()
            reference, reference_name = None, ""
            for name, backend in BACKENDS.items():
                def forward(backend=backend):
                    with sdpa_kernel(backend):
                        return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
                try:
                    with torch.no_grad():
                        out = forward().float()
                        if reference is None:
                            reference, reference_name = out, name
                        elif not torch.allclose(out, reference, atol=2e-2, rtol=2e-2):  # the backends agree
                            raise RuntimeError(f"differs from {reference_name}'s output by "
                                               f"{(out - reference).abs().max().item():.3g}")
                        seconds = time_graph(forward, args.calls, 10)
                    rows.append({"key": key, "backend": name, "seconds": seconds, "kv_bytes": kv_bytes})
                    print(f"{key} {name}: {seconds * 1e6:.1f} us, {kv_bytes / seconds / 1e9:.0f} GB/s of K and V",
                          flush=True)
                except Exception as e:  # a backend that refuses the shape
                    rows.append({"key": key, "backend": name, "seconds": None, "kv_bytes": kv_bytes,
                                 "refused": str(e)[:200]})
                    print(f"{key} {name}: refused: {str(e)[:120]}", flush=True)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump({"torch": torch.__version__, "cudnn": torch.backends.cudnn.version(),
                   "gpu": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
