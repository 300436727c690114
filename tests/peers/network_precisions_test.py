#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: gpucmp contributors
"""Host test of scripts/models/network-precisions.py on a synthetic benchmarks/resnet50 result
file: each precision's images/s (declared images over the time) over the FP16 row of the same
batch and mode, the accuracy counters beside it, the convolutions' precisions from the row's
algorithm, a failed row's status and message, NCHW rows apart, the acceptance JSON, each ratio
taken within its own run when two runs bring FP16 rows of one batch, and a file without network
rows refused."""
import json
import os
import subprocess
import sys
import tempfile

script = sys.argv[1]


def run(dtype, batch, seconds, top1=100.0, status="ok", message="", algorithm="convs: fused graph 53", layout="nhwc",
        centred=True):
    name = f"resnet50/{dtype}{'' if layout == 'nhwc' else '_' + layout}/bs{batch}/graph"
    row = {"name": name + "/iterations:1/manual_time", "benchmark": name, "status": status, "message": message,
           "precision": dtype, "mode": "graph",
           "axes": {"model": "resnet50", "dtype": dtype, "layout": layout, "batch": batch}}
    if status == "ok":
        row.update({"seconds": seconds, "items": batch, "algorithm": algorithm})
    counters = {"name": row["name"], "top1_agreement_pct": top1, "max_rel_logit_error": 0.01, "accuracy_images": 512,
                "fp32_top1_classes": 300}
    if centred:  # files from before the centred counters lack them
        counters.update({"centred_top1_agreement_pct": top1 - 2, "centred_max_rel_logit_error": 0.05,
                         "fp32_centred_top1_classes": 410})
    return row, counters


def write(path, runs):
    with open(path, "w") as f:
        json.dump({"context": {}, "benchmarks": [c for _, c in runs],
                   "gpucmp": {"schema_version": 2, "results": [r for r, _ in runs]}}, f)


with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, "rows.json")
    mixed = "convs: fp16 1, int8 52 (in FP16: conv1); every layer verified"
    runs = [run("fp16", 32, 32 / 30000.0), run("int8", 32, 32 / 45000.0, 99.4, algorithm=mixed),
            run("fp8_e4m3", 32, 0, status="failed", message="layer 'conv1' failed its check"),
            run("int8", 256, 256 / 90000.0, centred=False), run("fp16", 32, 32 / 15000.0, layout="nchw")]
    write(path, runs)
    out_md, out_json = os.path.join(d, "t.md"), os.path.join(d, "r.json")
    r = subprocess.run([sys.executable, script, path, "--out-md", out_md, "--out-json", out_json], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    md = open(out_md).read()
    assert "### resnet50, graph" in md, md
    line = next(l for l in md.splitlines() if l.startswith("| 32 | int8 |"))
    assert "| 45,000 | 1.50x | 99.4 % | 0.0100 | 512 (300) | 97.4 %, 0.0500 (410) | convs: fp16 1, int8 52 (in FP16: conv1)" in line, line
    line = next(l for l in md.splitlines() if l.startswith("| 32 | fp8_e4m3 |"))
    assert "failed: layer 'conv1' failed its check" in line, line
    line = next(l for l in md.splitlines() if l.startswith("| 256 | int8 |"))
    assert "| 90,000 | – |" in line, line  # no FP16 row at batch 256: no ratio
    assert "| 512 (300) | – |" in line, line  # no centred counters: a dash
    line = next(l for l in md.splitlines() if l.startswith("| 32 | fp16_nchw |"))
    assert "| 15,000 | 0.50x |" in line, line  # beside FP16 NHWC, the default layout
    rows = {r["key"]: r for r in json.load(open(out_json))["rows"]}
    assert abs(rows["int8/bs32/graph"]["speedup_over_fp16"] - 1.5) < 1e-9, rows
    assert rows["int8/bs32/graph"]["top1_agreement_pct"] == 99.4, rows
    assert rows["int8/bs32/graph"]["centred_top1_agreement_pct"] == 97.4, rows
    assert rows["int8/bs256/graph"]["centred_top1_agreement_pct"] is None, rows
    assert "error" in rows["fp8_e4m3/bs32/graph"] and rows["int8/bs256/graph"]["speedup_over_fp16"] is None, rows
    assert abs(rows["int8/bs32/graph"]["fp16_images_per_s"] - 30000) < 1e-6, rows
    # A second run (FP8 beside its own FP16, slower that day): its ratio over its own FP16 row, the
    # first run's ratios unchanged, and the first run's FP16 row in the table.
    first, second = os.path.join(d, "first.json"), os.path.join(d, "second.json")
    write(first, [run("fp16", 32, 32 / 30000.0), run("int8", 32, 32 / 45000.0, 99.4)])
    write(second, [run("fp16", 32, 32 / 24000.0), run("fp8_e4m3", 32, 32 / 36000.0, 99.0)])
    r = subprocess.run([sys.executable, script, first, second, "--out-md", out_md, "--out-json", out_json],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    rows = {r["key"]: r for r in json.load(open(out_json))["rows"]}
    assert abs(rows["fp8_e4m3/bs32/graph"]["speedup_over_fp16"] - 1.5) < 1e-9, rows  # 36,000 over its run's 24,000
    assert abs(rows["int8/bs32/graph"]["speedup_over_fp16"] - 1.5) < 1e-9, rows  # 45,000 over its run's 30,000
    assert abs(rows["fp16/bs32/graph"]["images_per_s"] - 30000) < 1e-6, rows  # the first run's FP16 row
    other = os.path.join(d, "other.json")
    with open(other, "w") as f:
        json.dump({"benchmarks": [], "gpucmp": {"schema_version": 2, "results": [
            {"name": "gemm/x", "benchmark": "gemm/x", "status": "ok", "message": "", "precision": "fp16", "seconds": 1.0}]}}, f)
    r = subprocess.run([sys.executable, script, other], capture_output=True, text=True)
    assert r.returncode != 0 and "no network rows" in r.stderr, r.stderr
    untyped = os.path.join(d, "untyped.json")
    with open(untyped, "w") as f:
        json.dump({"benchmarks": []}, f)
    r = subprocess.run([sys.executable, script, untyped], capture_output=True, text=True)
    assert r.returncode != 0 and "has no typed gpucmp results" in r.stderr, r.stderr
print("network-precisions: ok")
