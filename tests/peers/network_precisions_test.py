#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: gpucmp contributors
"""Host test of scripts/models/network-precisions.py on synthetic benchmarks/resnet50 rows:
each precision's images/s over the FP16 row of the same batch and mode, the accuracy counters
beside it, the convolutions' precisions from the label, a failed row's error, the acceptance
JSON, and a file without network rows refused."""
import json
import os
import subprocess
import sys
import tempfile

script = sys.argv[1]


def row(dtype, batch, images_per_s, top1=100.0, error=None, label="convs: fused graph 53; every layer verified"):
    r = {"name": f"resnet50/{dtype}/bs{batch}/graph/iterations:1/manual_time", "real_time": 1000.0, "time_unit": "us",
         "items/s": images_per_s, "top1_agreement_pct": top1, "max_rel_logit_error": 0.01, "accuracy_images": 512,
         "label": label}
    if error:
        r = {"name": r["name"], "error_occurred": True, "error_message": error}
    return r


with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, "rows.json")
    with open(path, "w") as f:
        mixed = "convs: fp16 1, int8 52 (in FP16: conv1); every layer verified"
        json.dump({"benchmarks": [row("fp16", 32, 30000.0), row("int8", 32, 45000.0, 99.4, label=mixed),
                                  row("fp8_e4m3", 32, 0, error="failed: layer 'conv1' failed its check"),
                                  row("int8", 256, 90000.0)]}, f)
    out_md, out_json = os.path.join(d, "t.md"), os.path.join(d, "r.json")
    r = subprocess.run([sys.executable, script, path, "--out-md", out_md, "--out-json", out_json], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    md = open(out_md).read()
    assert "### resnet50, graph" in md, md
    line = next(l for l in md.splitlines() if l.startswith("| 32 | int8 |"))
    assert "| 45,000 | 1.50x | 99.4 % | 0.0100 | 512 | convs: fp16 1, int8 52 (in FP16: conv1) |" in line, line
    line = next(l for l in md.splitlines() if l.startswith("| 32 | fp8_e4m3 |"))
    assert "error: failed: layer 'conv1' failed its check" in line, line
    line = next(l for l in md.splitlines() if l.startswith("| 256 | int8 |"))
    assert "| 90,000 | – |" in line, line  # no FP16 row at batch 256: no ratio
    rows = {r["key"]: r for r in json.load(open(out_json))["rows"]}
    assert abs(rows["int8/bs32/graph"]["speedup_over_fp16"] - 1.5) < 1e-12, rows
    assert rows["int8/bs32/graph"]["top1_agreement_pct"] == 99.4, rows
    assert "error" in rows["fp8_e4m3/bs32/graph"] and rows["int8/bs256/graph"]["speedup_over_fp16"] is None, rows
    empty = os.path.join(d, "empty.json")
    with open(empty, "w") as f:
        json.dump({"benchmarks": [{"name": "gemm/x", "real_time": 1}]}, f)
    r = subprocess.run([sys.executable, script, empty], capture_output=True, text=True)
    assert r.returncode != 0 and "no resnet rows" in r.stderr, r.stderr
print("network-precisions: ok")
