#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: gpucmp contributors
"""What quantizing a layer buys, shape by shape: benchmarks/conv_layers' rows (Google
Benchmark JSON, --benchmark_out) as one table per batch, each precision's time beside the
FP16 row of the same shape and epilogue, with the ratio FP16 time / its time (> 1: faster
than FP16) and the geometric mean of the ratios over the shapes both ran. A row that did not
run (unsupported, failed its check) shows its error instead of a time.

Usage: conv-layer-ratios.py ROWS.json [ROWS.json ...] [--out-md T.md]
"""
import argparse
import json
import math
import re
import sys

NAME = re.compile(r"^conv_layer/(?P<dtype>[a-z0-9_]+?)_nhwc/(?P<shape>n(?P<n>\d+)_[^/]+)/(?P<epilogue>[^/]+)/")
ORDER = ["fp16", "bf16", "fp8_e4m3", "int8"]


def load(paths):
    rows = {}
    for path in paths:
        with open(path) as f:
            doc = json.load(f)
        for b in doc.get("benchmarks", []):
            m = NAME.match(b.get("name", ""))
            if not m or b.get("run_type") == "aggregate":
                continue
            key = (int(m["n"]), m["shape"], m["epilogue"], m["dtype"])
            if b.get("error_occurred"):
                rows[key] = {"error": b.get("error_message", "error")}
            else:
                scale = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}[b.get("time_unit", "us")]
                rows[key] = {"us": b["real_time"] * scale, "tflops": b.get("TFLOP/s"), "label": b.get("label", "")}
    return rows


def table(rows, batch):
    shapes = sorted({(k[1], k[2]) for k in rows if k[0] == batch})
    dtypes = [d for d in ORDER if any(k[0] == batch and k[3] == d for k in rows)]
    out = [f"### Batch {batch}", "",
           "| shape | epilogue | " + " | ".join(f"{d} µs" for d in dtypes) + " | " +
           " | ".join(f"fp16 / {d}" for d in dtypes if d != "fp16") + " |",
           "|---|---|" + "---|" * (len(dtypes) + len(dtypes) - 1)]
    ratios = {d: [] for d in dtypes}
    for shape, epilogue in shapes:
        cells, speedups = [], []
        base = rows.get((batch, shape, epilogue, "fp16"), {})
        for d in dtypes:
            r = rows.get((batch, shape, epilogue, d))
            cells.append("not run" if r is None else ("error: " + r["error"][:60]) if "error" in r else f"{r['us']:.1f}")
            if d == "fp16":
                continue
            if r and "us" in r and "us" in base:
                speedup = base["us"] / r["us"]
                ratios[d].append(speedup)
                speedups.append(f"{speedup:.2f}x")
            else:
                speedups.append("–")
        out.append(f"| {shape} | {epilogue} | " + " | ".join(cells) + " | " + " | ".join(speedups) + " |")
    geo = [f"{math.exp(sum(map(math.log, ratios[d])) / len(ratios[d])):.2f}x ({len(ratios[d])} shapes)" if ratios[d] else "–"
           for d in dtypes if d != "fp16"]
    out.append("| geometric mean | | " + " | ".join("" for _ in dtypes) + " | " + " | ".join(geo) + " |")
    return "\n".join(out) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("rows", nargs="+")
    p.add_argument("--out-md")
    args = p.parse_args()
    rows = load(args.rows)
    if not rows:
        sys.exit("conv-layer-ratios.py: no conv_layer rows in " + ", ".join(args.rows))
    md = "\n".join(table(rows, b) for b in sorted({k[0] for k in rows}))
    if args.out_md:
        with open(args.out_md, "w") as f:
            f.write(md)
    print(md)


if __name__ == "__main__":
    main()
