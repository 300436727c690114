#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: gpucmp contributors
"""Host test of scripts/peers/compare-decoder-training.py on synthetic inputs: each training step
joined with PyTorch's of the same key (ratio, MFU, memory, the loss's fall), a peer's
out-of-memory row and an errored gpucmp row kept with their messages, and checkpointing's time
cost, memory saving and largest batches on each side."""
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

    key = "decoder_train/m/bf16/whole_model/b4_s2048"
    ours = write("ours.json", {"benchmarks": [
        row(key, 100.0, {"pct_of_peak": 50.0, "items/s": 81920.0, "memory_gb": 40.0, "largest_batch": 10,
                         "loss_first": 8.0, "loss_last": 2.0}),
        row(key + "/checkpointing", 125.0, {"pct_of_peak": 40.0, "items/s": 65536.0, "memory_gb": 30.0, "largest_batch": 30,
                                            "loss_first": 8.0, "loss_last": 2.5}),
        {"name": "decoder_train/m/bf16/blocks1/b64_s4096/graph/iterations:1/manual_time", "error_occurred": True,
         "error_message": "out of memory: 90 GB needed"},
        row("copy/kernel/1", 1.0, {"GB/s": 1.0}),
    ]})
    theirs = write("theirs.json", {"torch": "2.x", "gpu": "Test GPU", "rows": [
        {"key": key, "seconds": 0.150, "peak_bytes": 50e9},
        {"key": key + "/checkpointing", "seconds": 0.180, "peak_bytes": 25e9},
        {"key": "decoder_train/m/bf16/blocks1/b64_s4096", "error": "out of memory: CUDA"},
    ]})
    out_json, out_md = os.path.join(d, "out.json"), os.path.join(d, "out.md")
    subprocess.run([sys.executable, script, ours, theirs, "--out-json", out_json, "--out-md", out_md], check=True)
    result = json.load(open(out_json))
    rows = {r["key"]: r for r in result["rows"]}
    assert set(rows) == {key, key + "/checkpointing", "decoder_train/m/bf16/blocks1/b64_s4096"}, rows  # no copy row
    plain = rows[key]
    assert abs(plain["ratio"] - 1.5) < 1e-9 and abs(plain["seconds"] - 0.1) < 1e-12, plain
    assert plain["mfu_pct"] == 50.0 and abs(plain["torch_peak_gb"] - 50.0) < 1e-9, plain
    assert abs(plain["loss_ratio"] - 0.25) < 1e-12, plain
    failed = rows["decoder_train/m/bf16/blocks1/b64_s4096"]
    assert "90 GB" in failed["error"] and "CUDA" in failed["torch_error"] and "ratio" not in failed, failed
    (c,) = result["checkpointing"]
    assert c["key"] == key, c
    assert abs(c["gpucmp_time_cost"] - 0.25) < 1e-9 and abs(c["gpucmp_memory_saving"] - 0.25) < 1e-9, c
    assert abs(c["torch_time_cost"] - 0.2) < 1e-9 and abs(c["torch_memory_saving"] - 0.5) < 1e-9, c
    assert c["largest_batch"] == [10, 30], c
    table = open(out_md).read()
    assert f"| {key} | 100.0 | 81,920 | 50.0 % | 40.0 | 150.0 | 50.0 | 1.50x |" in table, table
    assert f"| {key} | +25.0% | 25.0% | 10 → 30 | +20.0% | 50.0% |" in table, table
    # No training row: refused by name.
    empty = write("empty.json", {"benchmarks": [row("copy/kernel/1", 1.0, {"GB/s": 1.0})]})
    refused = subprocess.run([sys.executable, script, empty, theirs], capture_output=True, text=True)
    assert refused.returncode != 0 and "no decoder_train rows" in refused.stderr, refused.stderr
print("compare-decoder-training: ok")
