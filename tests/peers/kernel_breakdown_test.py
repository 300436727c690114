#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: gpucmp contributors
"""Host test of scripts/kernel-breakdown.py on a synthetic --gpucmp_kernels_out file: kernels
grouped by the first matching --group, the rest by name, time a call = launches x median,
shares of the busy time, exposed time a call and its share of the covered time (and '–' for a
file without it), --match, and bad input refused by name."""
import json
import os
import subprocess
import sys
import tempfile

script = sys.argv[1]


def run(*args):
    return subprocess.run([sys.executable, script, *args], capture_output=True, text=True)


def kernel(name, per_launch, median_us, exposed_us=None):  # over 10 calls
    k = {"name": name, "kind": "kernel", "count": int(per_launch * 10), "per_launch": per_launch,
         "total_s": per_launch * 10 * median_us * 1e-6, "median_s": median_us * 1e-6, "share": 0}
    if exposed_us is not None:
        k["exposed_s"] = per_launch * 10 * exposed_us * 1e-6
    return k


with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, "kernels.json")
    with open(path, "w") as f:
        json.dump({"gpucmp_version": "0", "breakdowns": [
            {"benchmark": "decoder/decode/b1/kernel", "kernels": [
                kernel("void gpucmp::detail::gemv_kernel<bf16, 4>(...)", 96, 20.0, 19.0),
                kernel("void gpucmp::detail::gemv_kernel<bf16, 1>(...)", 32, 10.0, 9.0),
                kernel("void gpucmp::detail::rmsnorm_kernel<bf16>(...)", 64, 2.0, 0.5),
                kernel("sm90_fmha_decode", 32, 8.0, 8.0)]},
            {"benchmark": "decoder/decode/b16/kernel", "kernels": [kernel("gemv", 1, 5.0)]}]}, f)
    out_json = os.path.join(d, "out.json")
    r = run(path, "--group", "GEMV=gemv_kernel", "--group", "norm=rmsnorm", "--match", "b1/", "--out-json", out_json)
    assert r.returncode == 0, r.stderr
    rows = json.load(open(out_json))["rows"]
    assert [x["benchmark"] for x in rows] == ["decoder/decode/b1/kernel"], rows
    groups = {g["group"]: g for g in rows[0]["groups"]}
    assert groups["GEMV"]["launches"] == 128 and abs(groups["GEMV"]["us"] - (96 * 20 + 32 * 10)) < 1e-6, groups
    assert abs(groups["norm"]["us"] - 128) < 1e-6 and groups["sm90_fmha_decode"]["launches"] == 32, groups
    busy = 96 * 20 + 32 * 10 + 128 + 256
    assert abs(rows[0]["busy_us"] - busy) < 1e-6, rows[0]
    assert abs(groups["GEMV"]["share"] - round(2240 / busy, 4)) < 1e-9, groups
    assert [g["group"] for g in rows[0]["groups"]][0] == "GEMV", "largest first"
    assert "| GEMV | 128 | 2240.0 |" in r.stdout, r.stdout
    covered = 96 * 19 + 32 * 9 + 64 * 0.5 + 32 * 8
    assert abs(rows[0]["covered_us"] - covered) < 1e-6, rows[0]
    assert abs(groups["norm"]["exposed_us"] - 32) < 1e-6, groups
    assert abs(groups["GEMV"]["exposed_share"] - round((96 * 19 + 32 * 9) / covered, 4)) < 1e-9, groups
    assert "| norm | 64 | 128.0 | 4.9 % | 32.0 | 1.3 % |" in r.stdout, r.stdout
    # A file written before exposed_s: those columns '–', the rest as before.
    r = run(path, "--match", "b16/")
    assert r.returncode == 0 and "| gemv | 1 | 5.0 | 100.0 % | – | – |" in r.stdout, r.stdout
    # bad input, named
    r = run(path, "--group", "GEMV")
    assert r.returncode != 0 and "NAME=REGEX" in r.stderr, r.stderr
    r = run(path, "--match", "nothing-like-this")
    assert r.returncode != 0 and "no kernel-mode row" in r.stderr, r.stderr
    with open(path, "w") as f:
        json.dump({"benchmarks": []}, f)
    r = run(path)
    assert r.returncode != 0 and "no 'breakdowns' list" in r.stderr, r.stderr
    r = run(os.path.join(d, "missing.json"))
    assert r.returncode != 0 and "cannot read" in r.stderr, r.stderr
print("kernel-breakdown: all checks passed")
