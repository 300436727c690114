#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: gpucmp contributors
"""How fast can an FP32 ResNet-50 built on cuDNN convolutions be, next to PyTorch's?

A network cannot run faster than its 53 convolutions: fusing the epilogues removes the other
layers' memory traffic but does not make a convolution faster. This script sums, per batch,
each convolution's fastest measured time in FP32 (no TF32) over the sources given: PyTorch's
F.conv2d with cudnn.benchmark in NCHW and NHWC (torch_ops.py --only conv_fp32) and gpucmp's
timed search over both cuDNN APIs (conv_sweep, conv_fwd/cudnn/fp32_nchw), each counted as often as
ResNet-50 uses its shape (the layer table in include/gpucmp/data/resnet50_v1_5.hpp). The
ceiling on gpucmp / PyTorch is then PyTorch's whole-network time (torch_resnet50.py, graph
replay) divided by that sum.

Usage: fp32-conv-bound.py --torch-ops T.json [--gpucmp-conv C.json ...] --torch-resnet50 R.json
       [--gpucmp-resnet50 G.json] --out-md F.md --out-json F.json
"""
import argparse
import json
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import gpucmp_results  # noqa: E402  (python/gpucmp_results: the one reader of gpucmp's files)

HERE = os.path.dirname(os.path.abspath(__file__))
LAYER_TABLE = os.path.join(HERE, "..", "..", "include", "gpucmp", "data", "resnet50_v1_5.hpp")
UNITS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}


def resnet50_convs(path=LAYER_TABLE):
    """(name, C, K, kernel, stride, padding, input size) of each of the 53 convolutions."""
    pattern = re.compile(r'\{"([\w.]+)",\s*(\d+),\s*(\d+),\s*(\d+),\s*(\d+),\s*(\d+),\s*(\d+),\s*(\d+)\}')
    with open(path) as f:
        layers = [(m[1], *map(int, m.groups()[1:7])) for m in pattern.finditer(f.read())]
    if len(layers) != 53:
        raise ValueError(f"{path}: expected 53 convolutions, found {len(layers)}")
    return layers


def shape_name(batch, c, k, r, stride, pad, size):
    return f"n{batch}_c{c}_h{size}_w{size}_k{k}_r{r}_s{r}_p{pad}_u{stride}"


def torch_conv_seconds(path, layout):
    with open(path) as f:
        doc = json.load(f)
    prefix = f"conv_fwd/fp32_{layout}/"
    return {r["key"][len(prefix):]: r["seconds"] for r in doc["rows"] if r["key"].startswith(prefix)}


def gpucmp_conv_seconds(paths):
    """Per shape: the median over files of gpucmp's measured FP32 NCHW forward convolutions in
    graph mode (typed rows; the shape is the fourth part of conv_fwd/cudnn/fp32_nchw/<shape>/graph)."""
    rounds = {}
    for path in paths:
        for r in gpucmp_results.load(path).rows:
            parts = r.benchmark.split("/")
            if not r.ok or r.mode != "graph" or parts[:3] != ["conv_fwd", "cudnn", "fp32_nchw"] or len(parts) < 4:
                continue
            rounds.setdefault(parts[3], []).append(r.seconds)
    return {k: statistics.median(v) for k, v in rounds.items()}


def network_seconds(path, fmt):
    """resnet50/fp32/bs<N>/graph -> seconds, from torch_resnet50.py ("torch") or gpucmp ("gbench") JSON."""
    if path is None:
        return {}
    if fmt == "torch":
        with open(path) as f:
            return {r["key"]: r["seconds"] for r in json.load(f)["rows"]}
    return {"/".join(r.benchmark.split("/")[:4]): r.seconds for r in gpucmp_results.load(path).rows if r.ok}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--torch-ops", required=True)
    parser.add_argument("--gpucmp-conv", nargs="*", default=[])
    parser.add_argument("--torch-resnet50", required=True)
    parser.add_argument("--gpucmp-resnet50")
    parser.add_argument("--out-md", required=True)
    parser.add_argument("--out-json", required=True)
    args = parser.parse_args()
    layers = resnet50_convs()
    # Every source of a time for a shape: the fastest counts.
    sources = {"PyTorch NCHW": torch_conv_seconds(args.torch_ops, "nchw"),
               "PyTorch NHWC": torch_conv_seconds(args.torch_ops, "nhwc"),
               "gpucmp NCHW": gpucmp_conv_seconds(args.gpucmp_conv)}
    torch_net = network_seconds(args.torch_resnet50, "torch")
    gpucmp_net = network_seconds(args.gpucmp_resnet50, "gbench")
    batches = sorted({int(k.split("_")[0][1:]) for times in sources.values() for k in times})
    if not sources["PyTorch NCHW"]:
        print("fp32-conv-bound: no conv_fwd/fp32_nchw rows in " + args.torch_ops, file=sys.stderr)
        return 1
    rows = []
    for batch in batches:
        total, wins, missing = 0.0, {s: 0 for s in sources}, []
        for name, c, k, r, stride, pad, size in layers:
            key = shape_name(batch, c, k, r, stride, pad, size)
            timed = [(times[key], source) for source, times in sources.items() if key in times]
            if not timed:
                missing.append(name)
                continue
            seconds, source = min(timed)
            total += seconds
            wins[source] += 1
        if missing:
            print(f"fp32-conv-bound: batch {batch}: no time for {', '.join(missing)}", file=sys.stderr)
            return 1
        key = f"resnet50/fp32/bs{batch}/graph"
        torch_total = torch_net.get(key)
        rows.append({"batch": batch, "convolutions_seconds": total, "fastest_source_counts": wins,
                     "pytorch_network_seconds": torch_total, "gpucmp_network_seconds": gpucmp_net.get(key),
                     "ceiling_ratio": torch_total / total if torch_total else None})
    lines = ["FP32 ResNet-50 (no TF32): the sum of the 53 convolutions' fastest measured times, each the "
             "fastest of: " + ", ".join(s for s, t in sources.items() if t) + " (PyTorch: F.conv2d with "
             "cudnn.benchmark, graph replay; gpucmp: conv_sweep's timed search over both cuDNN APIs), "
             "against PyTorch's whole network (graph replay). Ceiling = PyTorch network / sum of "
             "convolutions: a network made of these convolutions cannot beat PyTorch by more. "
             "Generated by scripts/models/fp32-conv-bound.py.", "",
             "| batch | 53 convolutions, ms | fastest source (convolutions) | PyTorch network, ms | gpucmp network (NHWC), ms | ceiling on gpucmp / PyTorch |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        fmt = lambda s: "–" if s is None else f"{s * 1e3:.2f}"
        ceiling = "–" if r["ceiling_ratio"] is None else f"{r['ceiling_ratio']:.2f}×"
        counts = ", ".join(f"{s} {n}" for s, n in r["fastest_source_counts"].items() if n)
        lines.append(f"| {r['batch']} | {fmt(r['convolutions_seconds'])} | {counts} | {fmt(r['pytorch_network_seconds'])} | "
                     f"{fmt(r['gpucmp_network_seconds'])} | {ceiling} |")
    with open(args.out_md, "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(args.out_json, "w") as f:
        json.dump({"rows": rows}, f, indent=1)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
