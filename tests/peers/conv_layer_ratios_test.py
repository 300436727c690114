#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: gpucmp contributors
"""Host test of scripts/models/conv-layer-ratios.py on synthetic benchmarks/conv_layers rows:
each precision beside the FP16 row of its shape (ratio FP16 time / its time), one table per
batch, the geometric mean over the shapes both ran, a failed row's error in place of its
time, and a file without conv_layer rows refused."""
import json
import os
import subprocess
import sys
import tempfile

script = sys.argv[1]


def row(dtype, shape, us, error=None):
    r = {"name": f"conv_layer/{dtype}_nhwc/{shape}/bias+relu/graph/iterations:1/manual_time", "real_time": us,
         "time_unit": "us"}
    if error:
        r["error_occurred"] = True
        r["error_message"] = error
    return r


with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, "rows.json")
    a, b, big = "n32_c64_h56_w56_k64_r1_s1_p0_u1", "n32_c64_h56_w56_k64_r3_s3_p1_u1", "n256_c64_h56_w56_k64_r1_s1_p0_u1"
    with open(path, "w") as f:
        json.dump({"benchmarks": [row("fp16", a, 20.0), row("int8", a, 10.0), row("fp8_e4m3", a, 16.0),
                                  row("fp16", b, 40.0), row("int8", b, 10.0),
                                  row("fp8_e4m3", b, 0, "unsupported: no cuDNN plan runs it"),
                                  row("fp16", big, 100.0), row("int8", big, 50.0)]}, f)
    out_md = os.path.join(d, "t.md")
    r = subprocess.run([sys.executable, script, path, "--out-md", out_md], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    md = open(out_md).read()
    assert "### Batch 32" in md and "### Batch 256" in md, md
    line_a = next(l for l in md.splitlines() if l.startswith(f"| {a} |"))
    assert "| 20.0 | 16.0 | 10.0 | 1.25x | 2.00x |" in line_a, line_a
    line_b = next(l for l in md.splitlines() if l.startswith(f"| {b} |"))
    assert "error: unsupported: no cuDNN plan" in line_b and "| – | 4.00x |" in line_b, line_b
    geo = [l for l in md.splitlines() if l.startswith("| geometric mean")]
    assert "1.25x (1 shapes)" in geo[0] and "2.83x (2 shapes)" in geo[0], geo  # sqrt(2 x 4)
    assert "2.00x (1 shapes)" in geo[1], geo
    empty = os.path.join(d, "empty.json")
    with open(empty, "w") as f:
        json.dump({"benchmarks": [{"name": "gemm/x", "real_time": 1}]}, f)
    r = subprocess.run([sys.executable, script, empty], capture_output=True, text=True)
    assert r.returncode != 0 and "no conv_layer rows" in r.stderr, r.stderr
print("conv-layer-ratios: ok")
