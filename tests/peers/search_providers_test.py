#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: gpucmp contributors
"""Host test of scripts/search-providers.py on a synthetic search log: each provider's fastest
verified candidate, failed candidates left out, a search without one provider's candidate,
--match, and bad input refused by name."""
import json
import os
import subprocess
import sys
import tempfile

script = sys.argv[1]


def run(*args):
    return subprocess.run([sys.executable, script, *args], capture_output=True, text=True)


def candidate(algorithm, us, failure=""):
    return {"algorithm": algorithm, "us": us, "timings": 1, "duel_timings": 0, "failure": failure}


with tempfile.TemporaryDirectory() as d:
    log = os.path.join(d, "search.jsonl")
    with open(log, "w") as f:
        for line in [
            {"benchmark": "attention/decode/b1", "chosen": "engine 1 (search)", "candidates": [
                candidate("engine 1", 8.0), candidate("engine 2", 20.0),
                candidate("gpucmp kernel, 64 keys", 6.0, failure="mismatch at 3"),  # faster, but wrong: not counted
                candidate("gpucmp kernel, 128 keys", 10.0), candidate("gpucmp kernel, 256 keys", 12.0)]},
            {"benchmark": "attention/decode/b64", "chosen": "gpucmp kernel, 512 keys (search)", "candidates": [
                candidate("engine 1", 100.0), candidate("gpucmp kernel, 512 keys", 80.0)]},
            {"benchmark": "attention/prefill/b4", "chosen": "engine 3 (search)", "candidates": [candidate("engine 3", 50.0)]},
        ]:
            f.write(json.dumps(line) + "\n")
    out_json = os.path.join(d, "out.json")
    r = run(log, "--provider", "cudnn=^engine", "--provider", "gpucmp=^gpucmp", "--out-json", out_json)
    assert r.returncode == 0, r.stderr
    rows = json.load(open(out_json))["rows"]
    assert [row["benchmark"] for row in rows] == ["attention/decode/b1", "attention/decode/b64", "attention/prefill/b4"]
    b1, b64, prefill = rows
    assert b1["best"]["cudnn"] == {"algorithm": "engine 1", "us": 8.0}, b1
    assert b1["best"]["gpucmp"] == {"algorithm": "gpucmp kernel, 128 keys", "us": 10.0}, b1
    assert abs(b1["ratio"] - 0.8) < 1e-12, b1
    assert abs(b64["ratio"] - 1.25) < 1e-12 and b64["chosen"].startswith("gpucmp"), b64
    assert prefill["best"]["gpucmp"] is None and prefill["ratio"] is None, prefill
    assert "| attention/decode/b1 | 8.0 | 10.0 | 0.80 | gpucmp kernel, 128 keys |" in r.stdout, r.stdout
    assert "| attention/prefill/b4 | 50.0 | – | – | – |" in r.stdout, r.stdout
    r = run(log, "--provider", "cudnn=^engine", "--provider", "gpucmp=^gpucmp", "--match", "decode")
    assert r.returncode == 0 and "prefill" not in r.stdout, r.stdout
    # Bad input: named.
    for args, message in [
        ([log, "--provider", "cudnn=^engine"], "at least two"),
        ([log, "--provider", "cudnn", "--provider", "gpucmp=^gpucmp"], "NAME=REGEX"),
        ([log, "--provider", "a=(", "--provider", "b=x"], "bad REGEX"),
        ([log, "--provider", "a=x", "--provider", "b=y", "--match", "nothing-matches"], "no search"),
        ([os.path.join(d, "missing.jsonl"), "--provider", "a=x", "--provider", "b=y"], "missing.jsonl"),
    ]:
        r = run(*args)
        assert r.returncode != 0 and message in r.stderr, (args, r.stderr)
    with open(log, "a") as f:
        f.write("{not json\n")
    r = run(log, "--provider", "a=x", "--provider", "b=y")
    assert r.returncode != 0 and "search.jsonl:4: not JSON" in r.stderr, r.stderr
print("search-providers: ok")
