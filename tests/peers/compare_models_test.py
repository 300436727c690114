#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: gpucmp contributors
"""Host tests of the models issue's two tables on synthetic inputs:
scripts/peers/compare-resnet50.py (ratios per row, medians over rounds, Google Benchmark's
name suffixes, bars, a missing bar row fails) and scripts/models/compare-logits.py (error
measures, bounds, a wrong file size fails, rows outside the bounds are for the record)."""
import json
import os
import random
import struct
import subprocess
import sys
import tempfile

resnet_script, logits_script = sys.argv[1], sys.argv[2]
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)


def run(args):
    return subprocess.run([sys.executable] + args, capture_output=True, text=True)


with tempfile.TemporaryDirectory() as d:
    def write(name, doc):
        path = os.path.join(d, name)
        with open(path, "w") as f:
            json.dump(doc, f)
        return path

    bars = [("fp16", b) for b in (16, 32, 64, 128, 256)] + [(t, b) for t in ("tf32", "fp32") for b in (16, 32, 64)]
    # gpucmp 2x PyTorch everywhere, except fp32 (1.1x); two rounds with different times.
    def gbench(scale):
        return {"benchmarks": [{"name": f"resnet50/{t}/bs{b}/graph/iterations:1/manual_time",
                                "real_time": scale * b * (1.0 / 1.1 if t == "fp32" else 0.5), "time_unit": "ms"}
                               for t, b in bars]}
    torch_doc = {"torch": "2.x", "cudnn": 91900,
                 "rows": [{"key": f"resnet50/{t}/bs{b}/graph", "seconds": b * 1e-3, "layout": "channels_last"} for t, b in bars]}
    g1, g2, g3 = write("g1.json", gbench(1.0)), write("g2.json", gbench(1.0)), write("g3.json", gbench(3.0))
    tt = write("t.json", torch_doc)
    md, js = os.path.join(d, "r.md"), os.path.join(d, "r.json")
    r = run([resnet_script, "--gpucmp", g1, g2, g3, "--torch", tt, "--out-md", md, "--out-json", js])
    doc = json.load(open(js))
    rows = {row["key"]: row for row in doc["rows"]}
    check(abs(rows["resnet50/fp16/bs64/graph"]["ratio"] - 2.0) < 1e-9, "median of three rounds (1, 1, 3) gives ratio 2.0")
    check(abs(rows["resnet50/fp32/bs16/graph"]["ratio"] - 1.1) < 1e-9, "fp32 ratio 1.1")
    check(rows["resnet50/fp16/bs16/graph"]["passed"] is True and rows["resnet50/fp32/bs16/graph"]["passed"] is False,
          "bars: fp16 passes, fp32 at 1.1x misses 1.2x")
    check(r.returncode == 1, "a missed bar makes the exit status 1")
    # A missing bar row is reported and fails.
    partial = write("p.json", {"benchmarks": gbench(1.0)["benchmarks"][1:]})
    r = run([resnet_script, "--gpucmp", partial, "--torch", tt, "--out-md", md, "--out-json", js])
    check(r.returncode == 1 and "no pair for resnet50/fp16/bs16/graph" in r.stderr, "missing row named")

    # Logits: reference rows; one file within the FP16 bound, one far off, one of the wrong size.
    random.seed(1)
    ref = [[random.gauss(0, 1) for _ in range(50)] for _ in range(4)]
    reference = write("ref.json", {"fp64": ref, "fp32": ref, "torch_fp16": [[v + 1e-3 for v in row] for row in ref],
                                   "batch": 4, "torch": "2.x", "torchvision": "0.x", "cudnn": 1, "weights": "synthetic"})
    def logits(name, rows):
        path = os.path.join(d, name)
        with open(path, "wb") as f:
            f.write(struct.pack(f"<{len(rows) * 50}f", *[v for row in rows for v in row]))
        return path
    near = logits("near.bin", [[v * (1 + 1e-3) for v in row] for row in ref])
    far = logits("far.bin", [[-v for v in row] for row in ref])
    r = run([logits_script, reference, "--logits", f"fp16={near}", f"diagnostic={far}", "--out-md", md, "--out-json", js])
    doc = json.load(open(js))
    by = {row["dtype"]: row for row in doc["rows"]}
    check(r.returncode == 0, "within bounds, and the out-of-bound row is only for the record")
    check(abs(by["fp16"]["max_rel_err_vs_fp32"] - 1e-3) < 1e-6 and by["fp16"]["top1_agreement"] == 1.0, "fp16 row measures")
    check(by["diagnostic"]["passed"] is None and by["diagnostic"]["top1_agreement"] == 0.0, "record-only row")
    r = run([logits_script, reference, "--logits", f"bf16={far}", "--out-md", md, "--out-json", js])
    check(r.returncode == 1, "bf16 far off fails")
    # A second process's row is held to its precision's bound: "fp16@2" far off fails.
    r = run([logits_script, reference, "--logits", f"fp16={near}", f"fp16@2={far}", "--out-md", md, "--out-json", js])
    by = {row["dtype"]: row for row in json.load(open(js))["rows"]}
    check(r.returncode == 1 and by["fp16@2"]["passed"] is False and by["fp16@2"]["bound"] == 2e-2,
          "fp16@2 gets FP16's bound and fails")
    check(by["fp16@2"]["torch_same_precision_rel_err"] is not None, "fp16@2 gets PyTorch's FP16 yardstick")
    short = logits("short.bin", ref[:3])
    r = run([logits_script, reference, "--logits", f"fp32={short}", "--out-md", md, "--out-json", js])
    check(r.returncode == 1 and "expected 4 x 50" in r.stderr, "wrong size named")

if failures:
    print("FAILED:\n  " + "\n  ".join(failures))
    sys.exit(1)
print("compare-resnet50 and compare-logits: all checks passed")
