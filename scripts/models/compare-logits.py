#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: gpucmp contributors
"""Compares gpucmp's ResNet-50 logits with torchvision's for the same weights and images.

Error measures, per precision, against torchvision FP32 (TF32 off) and against FP64:
  max relative error = max |gpucmp - reference| / max |reference| over the whole batch (a
                       norm-wise measure: element-wise ratios blow up at logits near zero)
  top-1 agreement    = share of images whose argmax equals the reference's
  centred            = the same two on logits minus their batch mean: with random weights
                       every image's logits share a large common part (the same top-1 class
                       for all), and the image-specific part is what a wrong layer distorts
PyTorch's own TF32 / FP16 / BF16 logits are compared the same way, as a yardstick.
Bounds (docs/models.md): FP32 1e-3 and identical top-1; TF32 and FP16 2e-2, BF16 1e-1, each
with >= 99 % top-1 agreement.

Usage: compare-logits.py REFERENCE.json --logits fp32=F.bin fp16=F.bin fp16@2=F.bin ... --out-md T.md --out-json T.json
A label PRECISION@N (the N-th process of that precision) or PRECISION_LAYOUT (nhwc, nchw) is
held to PRECISION's bounds; other labels are for the record.
Exit status 1 when a bound is missed.
"""
import argparse
import json
import statistics
import struct
import sys

BOUNDS = {"fp32": (1e-3, 1.0), "tf32": (2e-2, 0.99), "fp16": (2e-2, 0.99), "bf16": (1e-1, 0.99)}


def argmax(row):
    return max(range(len(row)), key=row.__getitem__)


def errors(got, ref):
    """(max |got - ref| / max |ref|, share of rows with the same argmax); rows of floats."""
    worst = max(abs(g - r) for gr, rr in zip(got, ref) for g, r in zip(gr, rr))
    scale = max(abs(r) for rr in ref for r in rr)
    top1 = sum(argmax(g) == argmax(r) for g, r in zip(got, ref)) / len(ref)
    return worst / scale, top1


def centred(rows):
    means = [statistics.fmean(column) for column in zip(*rows)]
    return [[v - m for v, m in zip(row, means)] for row in rows]


def read_logits(path, batch, classes):
    with open(path, "rb") as f:
        data = f.read()
    if len(data) != 4 * batch * classes:
        raise ValueError(f"{path} has {len(data) // 4} values, expected {batch} x {classes}")
    values = struct.unpack(f"<{batch * classes}f", data)
    return [list(values[i * classes:(i + 1) * classes]) for i in range(batch)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reference")
    parser.add_argument("--logits", nargs="+", required=True, help="dtype=path of resnet50_logits' output")
    parser.add_argument("--out-md", required=True)
    parser.add_argument("--out-json", required=True)
    args = parser.parse_args()
    with open(args.reference) as f:
        reference = json.load(f)
    fp64 = reference["fp64"]
    fp32 = reference["fp32"]
    batch, classes = len(fp32), len(fp32[0])
    # The top-1 margin says how hard agreement is: a tiny gap flips with any rounding.
    scale = max(abs(v) for row in fp64 for v in row)
    margin = statistics.median(sorted(row)[-1] - sorted(row)[-2] for row in fp64) / scale
    rows, ok = [], True
    for item in args.logits:
        dtype, path = item.split("=", 1)
        try:
            got = read_logits(path, batch, classes)
        except ValueError as e:
            print(f"compare-logits: {e}", file=sys.stderr)
            return 1
        rel32, top32 = errors(got, fp32)
        rel64, _ = errors(got, fp64)
        crel, ctop = errors(centred(got), centred(fp32))
        # "fp16@2": FP16 from a second process (each process uploads the weights anew);
        # "fp32_nchw": FP32 with NCHW activations. Other labels are for the record only.
        precision, _, layout = dtype.split("@", 1)[0].partition("_")
        if layout not in ("", "nhwc", "nchw"):
            precision = ""
        bound, top_needed = BOUNDS.get(precision, (None, None))
        passed = None if bound is None else rel32 <= bound and top32 >= top_needed
        ok &= passed is not False
        yard = reference.get(f"torch_{precision}")
        torch_rel = errors(yard, fp32)[0] if yard is not None else None
        torch_centred = errors(centred(yard), centred(fp32)) if yard is not None else None
        rows.append({"dtype": dtype, "max_rel_err_vs_fp32": rel32, "max_rel_err_vs_fp64": rel64, "top1_agreement": top32,
                     "centred_rel_err": crel, "centred_top1_agreement": ctop,
                     "bound": bound, "top1_needed": top_needed, "torch_same_precision_rel_err": torch_rel,
                     "torch_same_precision_centred": torch_centred, "passed": passed})
    lines = [f"ResNet-50 v1.5 logits, gpucmp vs torchvision (same weights: {reference['weights']}; batch {batch}; "
             f"torch {reference['torch']}, torchvision {reference['torchvision']}, cuDNN {reference['cudnn']}). "
             f"Relative error = max |error| / max |reference logit|; median top-1 margin "
             f"{margin:.2e} of the largest logit.", "",
             "| precision | max rel. error vs torchvision FP32 | vs FP64 | top-1 agreement | centred: rel. error, top-1 | PyTorch's own at this precision: rel. error; centred | bound | result |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        yard = "–"
        if r["torch_same_precision_rel_err"] is not None:
            c_rel, c_top = r["torch_same_precision_centred"]
            yard = f"{r['torch_same_precision_rel_err']:.2e}; centred {c_rel:.2e}, {100 * c_top:.1f} %"
        bound = "–" if r["bound"] is None else f"{r['bound']:.0e}, top-1 ≥ {100 * r['top1_needed']:.0f} %"
        result = "for the record" if r["passed"] is None else ("PASS" if r["passed"] else "FAIL")
        lines.append(f"| {r['dtype']} | {r['max_rel_err_vs_fp32']:.2e} | {r['max_rel_err_vs_fp64']:.2e} | "
                     f"{100 * r['top1_agreement']:.1f} % | {r['centred_rel_err']:.2e}, {100 * r['centred_top1_agreement']:.1f} % | "
                     f"{yard} | {bound} | {result} |")
    with open(args.out_md, "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(args.out_json, "w") as f:
        json.dump({"batch": batch, "median_top1_margin": margin, "rows": rows}, f, indent=1)
    print("\n".join(lines))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
