#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: gpucmp contributors
"""Times torchvision's ResNet-50 training step the way ../shared/reference/h200-peers.md
measured it: synthetic data, channels-last, SGD (momentum 0.9, weight decay 5e-5, foreach),
cudnn.benchmark=True; a step is zero_grad, forward, cross-entropy, backward, optimizer step.
  amp_fp16/eager   autocast FP16 with GradScaler, launched from Python
  bf16/eager       autocast BF16, launched from Python
  bf16/graph       the whole BF16 step captured in one CUDA graph (PyTorch's documented
                   whole-network capture: warm-up on a side stream, static input and labels)
  tf32/eager, tf32/graph   FP32 storage with TF32 allowed in cuDNN and cuBLAS
Time per step: the median over `--windows` windows of 20 steps between CUDA events, after 5
warm-up steps (the reference's 20 after 5, repeated so a median exists).
Usage: torch_training.py --out torch_training.json [--batches 64,128,256]
                         [--modes amp_fp16/eager,bf16/eager,bf16/graph,tf32/eager,tf32/graph]
Writes rows {"key": "train/resnet50/<precision>/bs<N>/<mode>", "seconds", "images_per_s"}.
"""
import argparse
import json
import statistics

import torch
import torch.nn.functional as F
import torchvision


def make_step(model, opt, x, y, precision, scaler):
    autocast = {"amp_fp16": torch.float16, "bf16": torch.bfloat16}.get(precision)

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=autocast or torch.float16, enabled=autocast is not None):
            out = model(x)
            loss = F.cross_entropy(out.float(), y)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        return loss

    return step


def time_steps(run, windows, steps=20, warmup=5):
    for _ in range(warmup):
        run()
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    per_step = []
    for _ in range(windows):
        start.record()
        for _ in range(steps):
            run()
        stop.record()
        stop.synchronize()
        per_step.append(start.elapsed_time(stop) * 1e-3 / steps)
    return statistics.median(per_step)


def measure(precision, mode, batch, windows):
    torch.backends.cudnn.benchmark = True
    tf32 = precision == "tf32"
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cuda.matmul.allow_tf32 = tf32
    model = torchvision.models.resnet50(weights=None).cuda().to(memory_format=torch.channels_last).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-5, foreach=True)
    x = torch.randn(batch, 3, 224, 224, device="cuda").contiguous(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (batch,), device="cuda")
    scaler = torch.amp.GradScaler("cuda") if precision == "amp_fp16" else None
    step = make_step(model, opt, x, y, precision, scaler)
    if mode == "eager":
        return time_steps(step, windows)
    # The whole step in one graph: warm up on a side stream, then capture.
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(graph):
        step()
    return time_steps(graph.replay, windows)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--batches", default="64,128,256")
    parser.add_argument("--modes", default="amp_fp16/eager,bf16/eager,bf16/graph,tf32/eager,tf32/graph")
    parser.add_argument("--windows", type=int, default=3)
    args = parser.parse_args()
    rows = []
    for batch in [int(b) for b in args.batches.split(",")]:
        for key in args.modes.split(","):
            precision, mode = key.split("/")
            if precision == "amp_fp16" and mode == "graph":
                raise SystemExit("torch_training: GradScaler synchronises the host; amp_fp16 runs eager only")
            seconds = measure(precision, mode, batch, args.windows)
            rows.append({"key": f"train/resnet50/{precision}/bs{batch}/{mode}", "seconds": seconds, "images_per_s": batch / seconds})
            print(f"torch_training: {precision} {mode} bs{batch}: {batch / seconds:.0f} img/s", flush=True)
            torch.cuda.empty_cache()
    with open(args.out, "w") as f:
        json.dump({"torch": torch.__version__, "torchvision": torchvision.__version__, "cudnn": torch.backends.cudnn.version(),
                   "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
