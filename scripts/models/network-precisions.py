#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: gpucmp contributors
"""A network's precisions side by side: benchmarks/resnet50's result files (--benchmark_out)
as one table per model and timing mode, each precision's images/s beside the FP16 row of the
same batch in the same run, with its accuracy against FP32 (top-1 agreement and the largest
relative logit error, the counters every row carries, as they are and on centred logits: each
class's mean FP32 logit taken out, where random weights' top-1 varies from image to image) and
what its convolutions ran in (the row's algorithm). A row that did not run shows its status and message. Facts come from the
typed rows (python/gpucmp_results): the axes model, dtype, layout and batch, the mode, the
declared images and the time.

Each ratio is taken in one run: a precision's images/s over the FP16 row of the same batch and
mode in the same file (one process, FP16 timed beside it). Several files may each bring an FP16
row of one batch (e.g. an INT8 run and an FP8 run); the table shows the first file's, and a row
whose file has no FP16 row of its batch gets no ratio.

Usage: network-precisions.py RESULTS.json [RESULTS.json ...] [--out-md T.md] [--out-json R.json]
--out-json writes {"rows": [{"key": "<dtype>[_<layout>]/bs<N>/<mode>", "images_per_s",
"speedup_over_fp16", "fp16_images_per_s" (the same run's), "top1_agreement_pct", "max_rel_logit_error", "accuracy_images", "fp32_top1_classes",
"centred_top1_agreement_pct", "centred_max_rel_logit_error", "fp32_centred_top1_classes"} or {"key", "error"}]}
for the acceptance rows (lab/acceptance/quantized.json); a counter a row lacks (files from before
the centred counters) is null.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import gpucmp_results  # noqa: E402  (python/gpucmp_results: the one reader of gpucmp's files)

ORDER = ["fp32", "tf32", "fp16", "bf16", "fp8_e4m3", "int8"]
ACCURACY = ("top1_agreement_pct", "max_rel_logit_error", "accuracy_images", "fp32_top1_classes",
            "centred_top1_agreement_pct", "centred_max_rel_logit_error", "fp32_centred_top1_classes")


def load(paths):
    """Rows by (model, mode, batch, precision); each remembers its file's FP16 rate of its batch."""
    rows = {}
    for path in paths:
        result = gpucmp_results.load(path)
        file_rows = {}
        for r in result.rows:
            axes = r.axes
            if not all(k in axes for k in ("model", "dtype", "layout", "batch")):
                continue
            precision = axes["dtype"] + ("" if axes["layout"] == "nhwc" else "_" + axes["layout"])
            key = (axes["model"], r.mode, int(axes["batch"]), precision)
            if not r.ok:
                file_rows[key] = {"error": f"{r.status}: {r.message}"}
                continue
            counters = result.benchmarks.get(r.name, {})
            row = {"images_per_s": r.items / r.seconds if r.items else None, "convs": r.algorithm or ""}
            row.update({k: counters.get(k) for k in ACCURACY})
            file_rows[key] = row
        for key, row in file_rows.items():
            if "error" not in row:
                row["fp16_images_per_s"] = file_rows.get(key[:3] + ("fp16",), {}).get("images_per_s")
            if key[3] == "fp16" and key in rows:
                continue  # the first run's FP16 row stands in the table; this one served its own run's ratios
            rows[key] = row
    return rows


def number(v, fmt):
    return "–" if v is None else format(v, fmt)


def order(precision):
    base = precision.split("_nchw")[0]
    return (ORDER.index(base) if base in ORDER else len(ORDER), precision)


def tables(rows):
    md, out = [], []
    for model, mode in sorted({(k[0], k[1]) for k in rows}):
        md += [f"### {model}, {mode}", "",
               "| batch | precision | images/s | over FP16 | top-1 agreement with FP32 | max relative logit error | "
               "images compared (FP32's top-1 classes) | centred: top-1 agreement, max relative error (FP32's classes) | "
               "convolutions |", "|---|---|---|---|---|---|---|---|---|"]
        for batch in sorted({k[2] for k in rows if k[:2] == (model, mode)}):
            for precision in sorted({k[3] for k in rows if k[:3] == (model, mode, batch)}, key=order):
                r = rows[(model, mode, batch, precision)]
                key = f"{precision}/bs{batch}/{mode}"
                if "error" in r:
                    md.append(f"| {batch} | {precision} | {r['error'][:90]} | | | | | | |")
                    out.append({"key": key, "error": r["error"]})
                    continue
                speedup = None
                if r["images_per_s"] and r["fp16_images_per_s"]:
                    speedup = r["images_per_s"] / r["fp16_images_per_s"]
                top1, centred = r["top1_agreement_pct"], r["centred_top1_agreement_pct"]
                centred_cell = "–" if centred is None else (
                    f"{centred:.1f} %, {number(r['centred_max_rel_logit_error'], '.4f')} "
                    f"({number(r['fp32_centred_top1_classes'], '.0f')})")
                md.append(f"| {batch} | {precision} | {number(r['images_per_s'], ',.0f')} | "
                          f"{'–' if speedup is None else f'{speedup:.2f}x'} | "
                          f"{number(top1, '.1f')}{'' if top1 is None else ' %'} | {number(r['max_rel_logit_error'], '.4f')} | "
                          f"{number(r['accuracy_images'], '.0f')} ({number(r['fp32_top1_classes'], '.0f')}) | {centred_cell} | "
                          f"{r['convs']} |")
                out.append({"key": key, "images_per_s": r["images_per_s"], "speedup_over_fp16": speedup,
                            "fp16_images_per_s": r["fp16_images_per_s"],
                            **{k: r[k] for k in ACCURACY}})
        md.append("")
    return "\n".join(md), out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("results", nargs="+")
    p.add_argument("--out-md")
    p.add_argument("--out-json")
    args = p.parse_args()
    try:
        rows = load(args.results)
    except (OSError, gpucmp_results.ResultFileError) as e:
        sys.exit(f"network-precisions.py: {e}")
    if not rows:
        sys.exit("network-precisions.py: no network rows (axes model, dtype, layout, batch) in " + ", ".join(args.results))
    md, out = tables(rows)
    if args.out_md:
        with open(args.out_md, "w") as f:
            f.write(md)
    if args.out_json:
        with open(args.out_json, "w") as f:
            json.dump({"rows": out}, f, indent=1)
    print(md)


if __name__ == "__main__":
    main()
