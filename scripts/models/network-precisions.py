#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: gpucmp contributors
"""A network's precisions side by side: benchmarks/resnet50's rows (Google Benchmark JSON,
--benchmark_out) as one table per timing mode, each precision's images/s beside the FP16 row
of the same model and batch in the same run, with its accuracy against FP32 (top-1 agreement
and the largest relative logit error, the counters every row carries) and what its
convolutions ran in. A row that did not run shows its error.

Usage: network-precisions.py ROWS.json [ROWS.json ...] [--out-md T.md] [--out-json R.json]
--out-json writes {"rows": [{"key": "<dtype>/bs<N>/<mode>", "images_per_s", "speedup_over_fp16",
"top1_agreement_pct", "max_rel_logit_error", "accuracy_images", "error"}]} for the acceptance
rows (lab/acceptance/quantized.json).
"""
import argparse
import json
import re
import sys

NAME = re.compile(r"^(?P<model>resnet\d+)/(?P<dtype>[a-z0-9_]+)/bs(?P<batch>\d+)/(?P<mode>eager|graph)(/|$)")
ORDER = ["fp32", "tf32", "fp16", "bf16", "fp8_e4m3", "int8"]


def load(paths):
    rows = {}
    for path in paths:
        with open(path) as f:
            doc = json.load(f)
        for b in doc.get("benchmarks", []):
            m = NAME.match(b.get("name", ""))
            if not m or b.get("run_type") == "aggregate":
                continue
            key = (m["model"], m["mode"], int(m["batch"]), m["dtype"])
            if b.get("error_occurred"):
                rows[key] = {"error": b.get("error_message", "error")}
                continue
            label = b.get("label", "")
            rows[key] = {"images_per_s": b.get("items/s"), "top1_agreement_pct": b.get("top1_agreement_pct"),
                         "max_rel_logit_error": b.get("max_rel_logit_error"), "accuracy_images": b.get("accuracy_images"),
                         "convs": label.split(";")[0] if label.startswith("convs:") else ""}
    return rows


def number(v, fmt):
    return "–" if v is None else format(v, fmt)


def tables(rows):
    md, out = [], []
    for model, mode in sorted({(k[0], k[1]) for k in rows}):
        md += [f"### {model}, {mode}", "",
               "| batch | precision | images/s | over FP16 | top-1 agreement with FP32 | max relative logit error | "
               "images compared | convolutions |", "|---|---|---|---|---|---|---|---|"]
        for batch in sorted({k[2] for k in rows if k[:2] == (model, mode)}):
            base = rows.get((model, mode, batch, "fp16"), {})
            for dtype in sorted({k[3] for k in rows if k[:3] == (model, mode, batch)},
                                key=lambda d: ORDER.index(d) if d in ORDER else len(ORDER)):
                r = rows[(model, mode, batch, dtype)]
                key = f"{dtype}/bs{batch}/{mode}"
                if "error" in r:
                    md.append(f"| {batch} | {dtype} | error: {r['error'][:80]} | | | | | |")
                    out.append({"key": key, "error": r["error"]})
                    continue
                speedup = None
                if r["images_per_s"] and base.get("images_per_s"):
                    speedup = r["images_per_s"] / base["images_per_s"]
                top1 = r["top1_agreement_pct"]
                md.append(f"| {batch} | {dtype} | {number(r['images_per_s'], ',.0f')} | "
                          f"{'–' if speedup is None else f'{speedup:.2f}x'} | {number(top1, '.1f')}{'' if top1 is None else ' %'} | "
                          f"{number(r['max_rel_logit_error'], '.4f')} | {number(r['accuracy_images'], '.0f')} | {r['convs']} |")
                out.append({"key": key, "images_per_s": r["images_per_s"], "speedup_over_fp16": speedup,
                            "top1_agreement_pct": top1, "max_rel_logit_error": r["max_rel_logit_error"],
                            "accuracy_images": r["accuracy_images"]})
        md.append("")
    return "\n".join(md), out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("rows", nargs="+")
    p.add_argument("--out-md")
    p.add_argument("--out-json")
    args = p.parse_args()
    rows = load(args.rows)
    if not rows:
        sys.exit("network-precisions.py: no resnet rows in " + ", ".join(args.rows))
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
