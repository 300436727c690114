#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: gpucmp contributors
"""gpucmp's attention rows beside PyTorch's backends on the same shapes, from one run.

usage: compare-attention.py GPUCMP.json TORCH.json [--out-json FILE] [--out-md FILE]

GPUCMP.json: benchmarks/attention_sweep's Google Benchmark output; TORCH.json:
scripts/peers/torch_attention.py's. For each gpucmp row: its TFLOP/s, each PyTorch backend's,
and ratio = the fastest PyTorch backend's time / gpucmp's (> 1: gpucmp faster). FLOPs as both
count them (causal: half the square). An FP8 row (no PyTorch peer) also gets over_bf16: its
TFLOP/s over gpucmp's BF16 row of the same shape in the same run. Writes {"rows": [{"key",
"gpucmp_tflops", "torch": {backend: tflops}, "torch_best_backend", "ratio"[, "over_bf16"]}]} and
a Markdown table.
"""
import argparse
import json
import re
import sys


def row_key(name):
    name = re.sub(r"/(iterations|repeats|manual_time|real_time|min_time|threads).*$", "", name)
    return re.sub(r"/(cold|hot|graph|kernel)$", "", name)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("gpucmp")
    parser.add_argument("torch")
    parser.add_argument("--out-json")
    parser.add_argument("--out-md")
    args = parser.parse_args()
    try:
        ours = json.load(open(args.gpucmp))
        theirs = json.load(open(args.torch))
    except (OSError, json.JSONDecodeError) as e:
        sys.exit(f"compare-attention: {e}")
    torch_rows = {}
    torch_keys = {r["key"] for r in theirs.get("rows", [])}
    for r in theirs.get("rows", []):
        if r.get("seconds"):
            torch_rows.setdefault(r["key"], {})[r["backend"]] = r["flops"] / r["seconds"] / 1e12
    rows = []
    for b in ours.get("benchmarks", []):
        if "TFLOP/s" not in b or b.get("error_occurred"):
            continue
        key = row_key(b["name"])
        peers = torch_rows.get(key, {})
        best = max(peers, key=peers.get) if peers else None
        rows.append({"key": key, "gpucmp_tflops": b["TFLOP/s"], "torch": peers, "torch_best_backend": best,
                     "ratio": b["TFLOP/s"] / peers[best] if best else None,
                     "algorithm": b.get("label", "").split(";")[0]})
    if not rows:
        sys.exit(f"compare-attention: {args.gpucmp} holds no attention row")
    tflops = {r["key"]: r["gpucmp_tflops"] for r in rows}
    for r in rows:
        bf16 = r["key"].replace("/fp8_e4m3/", "/bf16/")
        if "/fp8_e4m3/" in r["key"] and bf16 in tflops:
            r["over_bf16"] = r["gpucmp_tflops"] / tflops[bf16]
    out = {"gpu": ours.get("context", {}).get("gpu_name", ""), "torch": theirs.get("torch"),
           "torch_cudnn": theirs.get("cudnn"), "gpucmp_cudnn": ours.get("context", {}).get("cudnn_version"), "rows": rows}
    if args.out_json:
        with open(args.out_json, "w") as f:
            json.dump(out, f, indent=1)
            f.write("\n")
    backends = ["cudnn", "flash", "efficient"]
    lines = ["| row | gpucmp TFLOP/s | " + " | ".join(f"PyTorch {b}" for b in backends) + " | ratio (fastest PyTorch time / gpucmp's) | gpucmp plan |",
             "|---" * (4 + len(backends)) + "|"]
    for r in rows:
        timed = r["key"] in torch_keys  # PyTorch ran this row (a backend missing from it refused)
        cells = [f"{r['torch'][b]:.0f}" if b in r["torch"] else "refused" if timed else "–" for b in backends]
        ratio = f"{r['ratio']:.2f} ({r['torch_best_backend']})" if r["ratio"] else "–"
        if "over_bf16" in r:
            ratio = f"{r['over_bf16']:.2f}x gpucmp's BF16"
        lines.append(f"| {r['key'].removeprefix('attention/cudnn/')} | {r['gpucmp_tflops']:.0f} | " + " | ".join(cells) +
                     f" | {ratio} | {r['algorithm']} |")
    table = "\n".join(lines) + "\n"
    if args.out_md:
        with open(args.out_md, "w") as f:
            f.write(table)
    else:
        sys.stdout.write(table)


if __name__ == "__main__":
    main()
