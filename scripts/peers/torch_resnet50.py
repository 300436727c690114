#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: gpucmp contributors
"""Times torchvision's ResNet-50 v1.5 inference the way gpucmp's resnet50 benchmark times its own.

Each precision runs in PyTorch's best setting: cudnn.benchmark=True (timed algorithm search),
inference_mode, eval; FP16/BF16 channels-last; TF32 and FP32 (TF32 off in cuDNN and cuBLAS)
in whichever layout is faster here (both are timed, the faster is kept and named).
  graph: one forward pass captured in a CUDA graph, replayed back to back between events
         (gpucmp's graph mode), >= 20 ms warm-up, >= 0.1 s and >= 10 replays timed, median.
  eager: forward passes launched back to back from Python between events (the launch path
         shows when it is slower than the GPU, as in gpucmp's eager rows).
Usage: torch_resnet50.py --out torch_resnet50.json [--dtypes fp16,tf32,fp32] [--batches 16,32,64,128,256]
Writes rows {"key": "resnet50/<dtype>/bs<N>/<mode>", "seconds", "layout"}.
"""
import argparse
import json
import statistics

import torch
import torchvision

from torch_ops import time_graph

DTYPES = {"fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


def time_eager(fn, repetitions=10, min_seconds=0.1, warmup_seconds=0.02):
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    warmed = 0.0
    while warmed < warmup_seconds:
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        warmed += start.elapsed_time(stop) * 1e-3
    per_call, total, calls = [], 0.0, 4
    while len(per_call) < repetitions or total < min_seconds:
        start.record()
        for _ in range(calls):
            fn()
        stop.record()
        stop.synchronize()
        seconds = start.elapsed_time(stop) * 1e-3
        total += seconds
        per_call.append(seconds / calls)
    return statistics.median(per_call)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--dtypes", default="fp16,tf32,fp32")
    parser.add_argument("--batches", default="16,32,64,128,256")
    parser.add_argument("--fp32-batches", default="16,32,64", help="batches for tf32 and fp32")
    args = parser.parse_args()
    torch.backends.cudnn.benchmark = True
    rows = []
    for name in args.dtypes.split(","):
        tf32 = name == "tf32"
        torch.backends.cudnn.allow_tf32 = tf32
        torch.backends.cuda.matmul.allow_tf32 = tf32
        batches = args.batches if name in ("fp16", "bf16") else args.fp32_batches
        layouts = ["channels_last"] if name in ("fp16", "bf16") else ["channels_last", "nchw"]
        for batch in [int(b) for b in batches.split(",")]:
            best = {}
            for layout in layouts:
                model = torchvision.models.resnet50(weights=None).eval().cuda().to(DTYPES[name])
                x = torch.randn(batch, 3, 224, 224, device="cuda", dtype=DTYPES[name])
                if layout == "channels_last":
                    model = model.to(memory_format=torch.channels_last)
                    x = x.contiguous(memory_format=torch.channels_last)
                with torch.inference_mode():
                    for mode, timer in (("graph", lambda f: time_graph(f, 1, 10)), ("eager", time_eager)):
                        seconds = timer(lambda: model(x))
                        if mode not in best or seconds < best[mode][0]:
                            best[mode] = (seconds, layout)
                del model, x
                torch.cuda.empty_cache()
            for mode, (seconds, layout) in best.items():
                rows.append({"key": f"resnet50/{name}/bs{batch}/{mode}", "seconds": seconds, "layout": layout})
                print(f"torch_resnet50: {name} bs{batch} {mode}: {batch / seconds:.0f} img/s ({layout})", flush=True)
    torch.backends.cudnn.allow_tf32 = True
    with open(args.out, "w") as f:
        json.dump({"torch": torch.__version__, "cudnn": torch.backends.cudnn.version(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
