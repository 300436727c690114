#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: gpucmp contributors
"""Host test of scripts/peers/compare-decoder.py on synthetic inputs: each decoder step joined
with transformers' fastest backend that ran, a refused backend left out, the decode step's share
of its bandwidth roofline read against the same run's copy row, tokens a second per phase, joules
a token from a row's power and dollars per million tokens at a price."""
import json
import os
import subprocess
import sys
import tempfile

script = sys.argv[1]


def row(name, ms, counters):
    return dict({"name": name + "/graph/iterations:1/manual_time", "real_time": ms, "time_unit": "ms"}, **counters)


with tempfile.TemporaryDirectory() as d:
    def write(name, doc):
        path = os.path.join(d, name)
        with open(path, "w") as f:
            json.dump(doc, f)
        return path

    # A decode step of 4 ms moving 3,000 GB/s against a 4,000 GB/s copy; a prefill of 2048 tokens in 50 ms.
    ours = write("ours.json", {"context": {"gpu_name": "Test GPU"}, "benchmarks": [
        row("decoder/m/bf16/decode/b16_c2048", 4.0, {"GB/s": 3000.0, "power_w": 500.0}),
        row("decoder/m/bf16/prefill/b1_p2048", 50.0, {"GB/s": 400.0, "TFLOP/s": 600.0}),
        row("copy/kernel/1073741824", 0.5, {"GB/s": 4000.0}),
    ]})
    theirs = write("theirs.json", {"torch": "2.x", "transformers": "5.x", "rows": [
        {"key": "decoder/m/bf16/decode/b16_c2048", "backend": "static", "seconds": 0.010},
        {"key": "decoder/m/bf16/decode/b16_c2048", "backend": "default", "seconds": 0.040},
        {"key": "decoder/m/bf16/decode/b16_c2048", "backend": "compiled", "seconds": None, "refused": "crashed"},
        {"key": "decoder/m/bf16/prefill/b1_p2048", "backend": "eager", "seconds": 0.060},
    ]})
    out_json, out_md = os.path.join(d, "out.json"), os.path.join(d, "out.md")
    subprocess.run([sys.executable, script, ours, theirs, "--usd-per-hour", "3.6", "--out-json", out_json, "--out-md", out_md],
                   check=True)
    rows = {r["key"]: r for r in json.load(open(out_json))["rows"]}
    assert set(rows) == {"decoder/m/bf16/decode/b16_c2048", "decoder/m/bf16/prefill/b1_p2048"}, rows
    decode, prefill = rows["decoder/m/bf16/decode/b16_c2048"], rows["decoder/m/bf16/prefill/b1_p2048"]
    assert decode["peer_backend"] == "static" and abs(decode["ratio"] - 2.5) < 1e-9, decode
    assert set(decode["peer"]) == {"static", "default"}, decode
    assert abs(decode["roofline_fraction"] - 0.75) < 1e-9, decode
    assert abs(decode["tokens_per_s"] - 4000) < 1e-6, decode  # 16 tokens in 4 ms
    assert "roofline_fraction" not in prefill and abs(prefill["ratio"] - 1.2) < 1e-9, prefill
    assert abs(prefill["tokens_per_s"] - 40960) < 1e-6, prefill
    assert abs(decode["joules_per_token"] - 0.125) < 1e-12, decode  # 500 W x 4 ms / 16 tokens
    assert "joules_per_token" not in prefill, prefill  # timed without power
    assert abs(decode["usd_per_million_tokens"] - 0.25) < 1e-9, decode  # $3.6 an hour over 14.4 M tokens an hour
    table = open(out_md).read()
    assert "| decoder/m/bf16/decode/b16_c2048 | 4.00 | 4000 | 10.00 (static) | 2.50 | 0.75 | 500 | 0.125 | 0.25 |" in table, table
    bad = subprocess.run([sys.executable, script, ours, theirs, "--usd-per-hour", "inf"], capture_output=True, text=True)
    assert bad.returncode != 0 and "positive finite price" in bad.stderr, bad.stderr
    # No decoder row: refused by name.
    empty = write("empty.json", {"benchmarks": [row("copy/kernel/1", 1.0, {"GB/s": 1.0})]})
    refused = subprocess.run([sys.executable, script, empty, theirs], capture_output=True, text=True)
    assert refused.returncode != 0 and "holds no decoder row" in refused.stderr, refused.stderr
print("compare-decoder: ok")
