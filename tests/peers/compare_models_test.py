#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: gpucmp contributors
"""Host tests of the models issue's two tables on synthetic inputs:
scripts/peers/compare-resnet50.py (ratios per row, medians over rounds, Google Benchmark's
name suffixes, bars, a missing bar row fails) and scripts/models/compare-logits.py (error
measures, bounds, a wrong file size fails, rows outside the bounds are for the record), and
scripts/models/fp32-conv-bound.py (each of the 53 convolutions counted once at its fastest
source; a missing shape fails)."""
import json
import os
import random
import re
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from typed_fixture import typed  # noqa: E402

resnet_script, logits_script, bound_script = sys.argv[1], sys.argv[2], sys.argv[3]
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
        return typed([{"name": f"resnet50/{t}/bs{b}/graph/iterations:1/manual_time",
                       "real_time": scale * b * (1.0 / 1.1 if t == "fp32" else 0.5), "time_unit": "ms"}
                      for t, b in bars])
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
    # gpucmp's NCHW FP32 rows compete with its NHWC ones: the faster layout counts, and is named.
    nchw = gbench(1.0)
    nchw["benchmarks"] += [{"name": f"resnet50/fp32_nchw/bs{b}/graph/iterations:1/manual_time",
                            "real_time": b / 1.3, "time_unit": "ms"} for b in (16, 32)]
    nchw["benchmarks"].append({"name": "resnet50/fp32_nchw/bs64/graph/iterations:1/manual_time",
                               "real_time": 64 / 1.05, "time_unit": "ms"})  # slower than NHWC's 1.1x
    r = run([resnet_script, "--gpucmp", write("n.json", typed(nchw["benchmarks"])), "--torch", tt, "--out-md", md, "--out-json", js])
    rows = {row["key"]: row for row in json.load(open(js))["rows"]}
    check(abs(rows["resnet50/fp32/bs16/graph"]["ratio"] - 1.3) < 1e-9 and rows["resnet50/fp32/bs16/graph"]["gpucmp_layout"] == "nchw",
          "the faster NCHW row counts, named nchw")
    check(abs(rows["resnet50/fp32/bs64/graph"]["ratio"] - 1.1) < 1e-9 and rows["resnet50/fp32/bs64/graph"]["gpucmp_layout"] == "nhwc",
          "the faster NHWC row counts where NCHW is slower")
    check(rows["resnet50/fp32/bs16/graph"]["passed"] is True and "(nchw)" in open(md).read(), "table names gpucmp's layout")
    # A missing bar row is reported and fails.
    partial = write("p.json", typed(gbench(1.0)["benchmarks"][1:]))
    r = run([resnet_script, "--gpucmp", partial, "--torch", tt, "--out-md", md, "--out-json", js])
    check(r.returncode == 1 and "no pair for resnet50/fp16/bs16/graph" in r.stderr, "missing row named")
    # A run that left FP16's batch 16 out on purpose passes without it; one that asked for it fails.
    fp16_partial = write("p16.json", typed([b for b in gbench(1.0)["benchmarks"][1:] if "/fp16/" in b["name"]]))
    r = run([resnet_script, "--gpucmp", fp16_partial, "--torch", tt, "--out-md", md, "--out-json", js,
             "--dtypes", "fp16", "--fp16-batches", "32,64,128,256"])
    check(r.returncode == 0 and "no pair" not in r.stderr, "a batch left out on purpose is not missing")
    r = run([resnet_script, "--gpucmp", fp16_partial, "--torch", tt, "--out-md", md, "--out-json", js,
             "--dtypes", "fp16", "--fp16-batches", "16,32"])
    check(r.returncode == 1 and "no pair for resnet50/fp16/bs16/graph" in r.stderr
          and "fp32" not in r.stderr, "a batch asked for is missing; a precision left out is not")

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
    # A layout suffix keeps the precision's bound; any other suffix is for the record.
    r = run([logits_script, reference, "--logits", f"fp32_nchw={far}", f"fp16_diagnostic_run={far}", "--out-md", md, "--out-json", js])
    by = {row["dtype"]: row for row in json.load(open(js))["rows"]}
    check(r.returncode == 1 and by["fp32_nchw"]["passed"] is False and by["fp32_nchw"]["bound"] == 1e-3, "fp32_nchw held to FP32's bound")
    check(by["fp16_diagnostic_run"]["passed"] is None, "a diagnostic label is for the record")
    short = logits("short.bin", ref[:3])
    r = run([logits_script, reference, "--logits", f"fp32={short}", "--out-md", md, "--out-json", js])
    check(r.returncode == 1 and "expected 4 x 50" in r.stderr, "wrong size named")

    # FP32 bound: the 23 distinct shapes at batch 32, PyTorch NCHW 100 us each, NHWC 200 us,
    # gpucmp faster (50 us) on the stem only. ResNet-50 uses them 53 times.
    stem = "n32_c3_h224_w224_k64_r7_s7_p3_u2"
    table = open(os.path.join(os.path.dirname(bound_script), "..", "..", "include", "gpucmp", "data",
                              "resnet50_v1_5.hpp")).read()
    layers = re.findall(r'\{"[\w.]+",\s*(\d+),\s*(\d+),\s*(\d+),\s*(\d+),\s*(\d+),\s*(\d+),\s*\d+\}', table)
    keys = sorted({f"n32_c{c}_h{i}_w{i}_k{k}_r{r}_s{r}_p{p}_u{s}" for c, k, r, s, p, i in layers})
    check(len(layers) == 53 and len(keys) == 23, "layer table: 53 convolutions, 23 shapes")
    torch_rows = [{"key": f"conv_fwd/fp32_nchw/{k}", "seconds": 1e-4} for k in keys]
    torch_rows += [{"key": f"conv_fwd/fp32_nhwc/{k}", "seconds": 2e-4} for k in keys]
    ops = write("t_ops.json", {"rows": torch_rows})
    net = write("t_net.json", {"torch": "2.x", "cudnn": 1, "rows": [
        {"key": "resnet50/fp32/bs32/graph", "seconds": 0.0106, "layout": "nchw"}]})
    conv = write("g_conv.json", typed([
        {"name": f"conv_fwd/cudnn/fp32_nchw/{stem}/graph/iterations:1/manual_time", "real_time": 50, "time_unit": "us"}]))
    r = run([bound_script, "--torch-ops", ops, "--gpucmp-conv", conv, "--torch-resnet50", net, "--out-md", md, "--out-json", js])
    row = json.load(open(js))["rows"][0] if r.returncode == 0 else {}
    check(r.returncode == 0 and abs(row["convolutions_seconds"] - (52 * 1e-4 + 5e-5)) < 1e-12,
          "53 convolutions, each at its fastest source (stem from gpucmp)")
    check(row.get("fastest_source_counts") == {"PyTorch NCHW": 52, "PyTorch NHWC": 0, "gpucmp NCHW": 1}, "sources counted")
    check(abs(row.get("ceiling_ratio", 0) - 0.0106 / 0.00525) < 1e-9, "ceiling = PyTorch network / convolutions")
    partial = write("p_ops.json", {"rows": torch_rows[1:23]})
    r = run([bound_script, "--torch-ops", partial, "--torch-resnet50", net, "--out-md", md, "--out-json", js])
    check(r.returncode == 1 and "no time for" in r.stderr, "a missing shape is named")

if failures:
    print("FAILED:\n  " + "\n  ".join(failures))
    sys.exit(1)
print("compare-resnet50, compare-logits and fp32-conv-bound: all checks passed")
