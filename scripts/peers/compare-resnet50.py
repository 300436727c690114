#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: gpucmp contributors
"""Tables gpucmp's ResNet-50 inference against PyTorch's, row by row, with the models issue's bars.

Inputs: the resnet50 benchmark's Google Benchmark JSON (one file per round) and
torch_resnet50.py's JSON (one per round); each row is the median over its rounds. Ratio =
gpucmp images/s / PyTorch images/s in the same precision, batch and mode (graph vs graph,
eager vs eager). Each side runs in its faster layout per row: PyTorch's script reports the
layout it chose, and gpucmp's rows named resnet50/<dtype>_nchw/... (benchmarks/resnet50
--layouts=nhwc,nchw) compete with its NHWC rows resnet50/<dtype>/.... Bars: FP16 graph >= 2.0x
at batch 64, 128, 256 and >= 1.5x at 16 and 32; TF32 and FP32 graph >= 1.2x at 16, 32 and 64.
A bar's row missing on either side fails, unless the run left that precision or batch out on
purpose (--dtypes, --fp16-batches: what run-resnet50-comparison.sh was asked to run).
Usage: compare-resnet50.py --gpucmp R1.json [R2.json ...] --torch T1.json [T2.json ...] --out-md F.md --out-json F.json
       [--dtypes fp16,tf32,fp32] [--fp16-batches 16,32,64,128,256]
"""
import argparse
import json
import statistics
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import gpucmp_results  # noqa: E402  (python/gpucmp_results: the one reader of gpucmp's files)

BARS = {("fp16", 16): 1.5, ("fp16", 32): 1.5, ("fp16", 64): 2.0, ("fp16", 128): 2.0, ("fp16", 256): 2.0,
        ("tf32", 16): 1.2, ("tf32", 32): 1.2, ("tf32", 64): 1.2, ("fp32", 16): 1.2, ("fp32", 32): 1.2, ("fp32", 64): 1.2}


def gpucmp_seconds(paths):
    """Per row (resnet50/<dtype>/bs<N>/<mode>): the median over rounds of its faster layout,
    that layout, its label, and the errors of rows that did not run. From the files' typed
    rows; the key's parts follow the benchmarks' naming rule resnet50/<dtype>[_<layout>]/bs<N>/<mode>."""
    rounds, notes, errors = {}, {}, {}
    for path in paths:
        results = gpucmp_results.load(path)
        for r in results.rows:
            parts = r.benchmark.split("/")[:4]
            dtype, _, layout = parts[1].partition("_")
            name = "/".join([parts[0], dtype] + parts[2:])
            layout = layout or "nhwc"
            if not r.ok:
                errors["/".join(parts)] = r.message
                continue
            rounds.setdefault((name, layout), []).append(r.seconds)
            notes[(name, layout)] = results.benchmarks.get(r.name, {}).get("label", "")
    best, layouts, labels = {}, {}, {}
    for (name, layout), times in rounds.items():
        seconds = statistics.median(times)
        if name not in best or seconds < best[name]:
            best[name], layouts[name], labels[name] = seconds, layout, notes[(name, layout)]
    return best, layouts, labels, errors


def torch_seconds(paths):
    rounds, layouts, version = {}, {}, ""
    for path in paths:
        with open(path) as f:
            doc = json.load(f)
        version = f"PyTorch {doc['torch']}, cuDNN {doc['cudnn']}"
        for r in doc["rows"]:
            rounds.setdefault(r["key"], []).append(r["seconds"])
            layouts[r["key"]] = r["layout"]
    return {k: statistics.median(v) for k, v in rounds.items()}, layouts, version


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpucmp", nargs="+", required=True)
    parser.add_argument("--torch", nargs="+", required=True)
    parser.add_argument("--out-md", required=True)
    parser.add_argument("--out-json", required=True)
    parser.add_argument("--dtypes", default="fp16,tf32,fp32", help="the precisions the run measured (default all)")
    parser.add_argument("--fp16-batches", default="16,32,64,128,256",
                        help="FP16's batches the run measured (TF32 and FP32 always run 16, 32 and 64)")
    args = parser.parse_args()
    dtypes = set(args.dtypes.split(","))
    fp16_batches = {int(b) for b in args.fp16_batches.split(",")}
    ours, our_layouts, notes, errors = gpucmp_seconds(args.gpucmp)
    theirs, layouts, version = torch_seconds(args.torch)
    rows, ok = [], True
    for key in sorted(set(ours) & set(theirs), key=lambda k: (k.split("/")[1], k.split("/")[3], int(k.split("/")[2][2:]))):
        _, dtype, bs, mode = key.split("/")
        batch = int(bs[2:])
        ratio = theirs[key] / ours[key]
        bar = BARS.get((dtype, batch)) if mode == "graph" else None
        passed = None if bar is None else ratio >= bar
        if passed is False:
            ok = False
        rows.append({"key": key, "dtype": dtype, "batch": batch, "mode": mode, "gpucmp_img_s": batch / ours[key],
                     "torch_img_s": batch / theirs[key], "gpucmp_ms": ours[key] * 1e3, "torch_ms": theirs[key] * 1e3,
                     "ratio": ratio, "bar": bar, "passed": passed, "torch_layout": layouts[key],
                     "gpucmp_layout": our_layouts[key], "gpucmp_note": notes.get(key, "")})
    for key in BARS:
        if key[0] not in dtypes or (key[0] == "fp16" and key[1] not in fp16_batches):
            continue  # left out of this run on purpose
        name = f"resnet50/{key[0]}/bs{key[1]}/graph"
        if name not in ours or name not in theirs:
            ok = False
            failed = {k: e for k, e in errors.items() if k.split("/")[1].partition("_")[0] == key[0] and k.endswith(f"/bs{key[1]}/graph")}
            print(f"compare-resnet50: no pair for {name}" + "".join(f" (gpucmp {k}: {e})" for k, e in failed.items()), file=sys.stderr)
    rounds = min(len(args.gpucmp), len(args.torch))
    lines = [f"ResNet-50 v1.5 inference, gpucmp vs {version}; {rounds} interleaved round(s), median per row; "
             "ratio = gpucmp images/s / PyTorch images/s.", "",
             "| precision | batch | mode | gpucmp img/s (layout) | PyTorch img/s (layout) | gpucmp ms | PyTorch ms | ratio | bar | result |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        bar = "–" if r["bar"] is None else f"≥ {r['bar']:.1f}×"
        result = "–" if r["passed"] is None else ("PASS" if r["passed"] else "FAIL")
        lines.append(f"| {r['dtype']} | {r['batch']} | {r['mode']} | {r['gpucmp_img_s']:,.0f} ({r['gpucmp_layout']}) | {r['torch_img_s']:,.0f} "
                     f"({r['torch_layout']}) | {r['gpucmp_ms']:.3f} | {r['torch_ms']:.3f} | {r['ratio']:.2f}× | {bar} | {result} |")
    with open(args.out_md, "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(args.out_json, "w") as f:
        json.dump({"versions": version, "rounds": rounds, "rows": rows, "gpucmp_errors": errors}, f, indent=1)
    print("\n".join(lines))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
