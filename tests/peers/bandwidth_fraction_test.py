#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: gpucmp contributors
"""Host test of scripts/bandwidth-fraction.py and scripts/peers/compare-attention.py on
synthetic inputs: each memory-bound row read against the copy row of the nearest bytes, a peer's
time on the same rows as a ratio, rows without a peer left blank; attention forward and
backward rows joined with PyTorch's fastest backend by key, FP8 rows read against gpucmp's BF16."""
import json
import os
import subprocess
import sys
import tempfile

fraction_script, attention_script = sys.argv[1], sys.argv[2]


def gbench(rows, context=None):
    return {"context": context or {"gpu_name": "Test GPU"},
            "benchmarks": [dict({"name": name + "/graph/iterations:1/manual_time", "real_time": us,
                                 "time_unit": "us", "label": "candidate; verified"}, **counters)
                           for name, us, counters in rows]}


with tempfile.TemporaryDirectory() as d:
    def write(name, doc):
        path = os.path.join(d, name)
        with open(path, "w") as f:
            json.dump(doc, f)
        return path

    # A GEMV moving 32 MB in 10 us (3,200 GB/s), another 64 MB in 20 us; copies of 32 MB at
    # 4,000 GB/s and 64 MB at 3,200 GB/s (each read + written).
    results = write("gemv.json", gbench([
        ("gemv/bf16/b1_n4096_k4096", 10.0, {"GB/s": 3200.0}),
        ("gemv/bf16/b2_n4096_k4096", 20.0, {"GB/s": 3200.0}),
        ("copy/kernel/16000000", 8.0, {"GB/s": 4000.0}),
        ("copy/kernel/32000000", 20.0, {"GB/s": 3200.0}),
    ]))
    peer = write("torch.json", {"rows": [{"key": "gemv/bf16/b1_n4096_k4096", "seconds": 25e-6}]})
    out_json, out_md = os.path.join(d, "out.json"), os.path.join(d, "out.md")
    subprocess.run([sys.executable, fraction_script, results, "--prefix", "gemv", "--peer", peer,
                    "--out-json", out_json, "--out-md", out_md], check=True)
    rows = {r["key"]: r for r in json.load(open(out_json))["rows"]}
    assert set(rows) == {"gemv/bf16/b1_n4096_k4096", "gemv/bf16/b2_n4096_k4096"}, rows
    one, two = rows["gemv/bf16/b1_n4096_k4096"], rows["gemv/bf16/b2_n4096_k4096"]
    assert one["copy_key"] == "copy/kernel/16000000" and abs(one["fraction"] - 0.8) < 1e-9, one
    assert two["copy_key"] == "copy/kernel/32000000" and abs(two["fraction"] - 1.0) < 1e-9, two
    assert abs(one["ratio"] - 2.5) < 1e-9 and abs(one["peer_gbps"] - 1280.0) < 1e-6, one
    assert "ratio" not in two, two
    table = open(out_md).read()
    assert "| gemv/bf16/b1_n4096_k4096 | 3200 | 4000 | 0.80 | 1280 | 2.50 |" in table, table
    assert "| gemv/bf16/b2_n4096_k4096 | 3200 | 3200 | 1.00 | – | – |" in table, table

    # A cold row (L2 flushed before each call) is read against the cold copy, never the graph one.
    def cold(name, us, counters):
        return {"name": name + "/cold/iterations:1/manual_time", "real_time": us, "time_unit": "us",
                "label": "candidate; verified", **counters}
    doc = gbench([("gemv/bf16/b1_n4096_k4096", 10.0, {"GB/s": 3200.0}),
                  ("copy/kernel/16000000", 8.0, {"GB/s": 4000.0})])
    doc["benchmarks"] += [cold("gemv/bf16/b1_n4096_k4096", 16.0, {"GB/s": 2000.0}),
                          cold("copy/kernel/16000000", 12.8, {"GB/s": 2500.0})]
    cold_results = write("cold.json", doc)
    subprocess.run([sys.executable, fraction_script, cold_results, "--prefix", "gemv", "--out-json", out_json], check=True)
    rows = {r["key"]: r for r in json.load(open(out_json))["rows"]}
    assert set(rows) == {"gemv/bf16/b1_n4096_k4096", "gemv/bf16/b1_n4096_k4096/cold"}, rows
    assert rows["gemv/bf16/b1_n4096_k4096/cold"]["copy_key"] == "copy/kernel/16000000/cold", rows
    assert abs(rows["gemv/bf16/b1_n4096_k4096/cold"]["fraction"] - 0.8) < 1e-9, rows
    assert rows["gemv/bf16/b1_n4096_k4096"]["copy_key"] == "copy/kernel/16000000", rows
    # Without a cold copy, a cold row is refused by name rather than read against a graph copy.
    doc["benchmarks"].pop()
    no_cold_copy = write("no_cold_copy.json", doc)
    refused = subprocess.run([sys.executable, fraction_script, no_cold_copy, "--prefix", "gemv"],
                             capture_output=True, text=True)
    assert refused.returncode != 0 and "b1_n4096_k4096/cold has no copy row timed in its mode (cold)" in refused.stderr, \
        refused.stderr

    # --match keeps only matching rows of the prefixes.
    subprocess.run([sys.executable, fraction_script, results, "--prefix", "gemv", "--match", "b2_",
                    "--out-json", out_json], check=True)
    assert [r["key"] for r in json.load(open(out_json))["rows"]] == ["gemv/bf16/b2_n4096_k4096"]

    # Attention: gpucmp forward 500 and backward 400 TFLOP/s; PyTorch's cuDNN 450 and 440,
    # flash 300 and refused.
    ours = write("attention.json", gbench([
        ("attention/cudnn/bf16/b1_s8192_h32_d128/causal", 1000.0, {"TFLOP/s": 500.0}),
        ("attention/cudnn/bf16/b1_s8192_h32_d128/causal/bwd", 2000.0, {"TFLOP/s": 400.0}),
        ("attention/cudnn/fp8_e4m3/b1_s8192_h32_d128/causal", 700.0, {"TFLOP/s": 700.0}),
    ], {"gpu_name": "Test GPU", "cudnn_version": "91900"}))
    theirs = write("torch_attention.json", {"torch": "2.x", "cudnn": 91900, "rows": [
        {"key": "attention/cudnn/bf16/b1_s8192_h32_d128/causal", "backend": "cudnn", "seconds": 1.0, "flops": 450e12},
        {"key": "attention/cudnn/bf16/b1_s8192_h32_d128/causal", "backend": "flash", "seconds": 1.0, "flops": 300e12},
        {"key": "attention/cudnn/bf16/b1_s8192_h32_d128/causal/bwd", "backend": "cudnn", "seconds": 1.0, "flops": 440e12},
        {"key": "attention/cudnn/bf16/b1_s8192_h32_d128/causal/bwd", "backend": "flash", "seconds": None,
         "flops": 440e12, "refused": "no"},
    ]})
    out_json = os.path.join(d, "attention_out.json")
    subprocess.run([sys.executable, attention_script, ours, theirs, "--out-json", out_json,
                    "--out-md", os.path.join(d, "attention.md")], check=True)
    rows = {r["key"]: r for r in json.load(open(out_json))["rows"]}
    fwd, bwd = rows["attention/cudnn/bf16/b1_s8192_h32_d128/causal"], rows["attention/cudnn/bf16/b1_s8192_h32_d128/causal/bwd"]
    assert fwd["torch_best_backend"] == "cudnn" and abs(fwd["ratio"] - 500 / 450) < 1e-9, fwd
    assert bwd["torch_best_backend"] == "cudnn" and abs(bwd["ratio"] - 400 / 440) < 1e-9, bwd
    assert set(bwd["torch"]) == {"cudnn"}, bwd
    fp8 = rows["attention/cudnn/fp8_e4m3/b1_s8192_h32_d128/causal"]
    assert abs(fp8["over_bf16"] - 1.4) < 1e-9 and fp8["ratio"] is None, fp8
    assert "over_bf16" not in fwd, fwd
print("bandwidth-fraction and compare-attention: ok")
