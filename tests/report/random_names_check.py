#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: gpucmp contributors
"""The report takes no fact from a benchmark's name or message.

usage: random_names_check.py GPUCMP_REPORT CONTEXT_FILE OUT_DIR

Writes a result file whose typed rows have random names (no precision, mode or status word
in them) and messages without the old status prefixes, runs `gpucmp-report compare --csv`,
and checks that each row's kind comes from its status, its rate from its declared work and
time, and its projection from its precision field: two rows alike but for the precision
project differently. Exits 1 on the first failed check.
"""
import csv
import json
import os
import random
import string
import subprocess
import sys

KINDS = {"ok": "measured", "failed": "failed", "unsupported": "unsupported", "oom": "oom",
         "skipped": "skipped", "timeout": "timeout"}
WORDS = {"fp64", "fp32", "tf32", "fp16", "bf16", "fp8", "int8", "none", "cold", "hot", "graph", "kernel",
         "oom", "unsupported", "timeout", "skipped", "failed"}


def random_name(rng):
    while True:
        parts = ["".join(rng.choice(string.ascii_letters + string.digits + "-_") for _ in range(rng.randint(1, 9)))
                 for _ in range(rng.randint(1, 5))]
        if not any(p.lower() in WORDS for p in parts):
            return "/".join(parts)


def main():
    report, context_file, out_dir = sys.argv[1:4]
    os.makedirs(out_dir, exist_ok=True)
    rng = random.Random(20261202)
    context = json.load(open(context_file))["context"]
    rows, expected = [], {}
    for status in list(KINDS) * 3:
        name = random_name(rng)
        row = {"name": name + "/iterations:1/manual_time", "benchmark": name, "repetition_index": 0, "status": status,
               "message": "" if status == "ok" else "why: " + random_name(rng), "mode": rng.choice(["cold", "hot", "graph"]),
               "precision": rng.choice(["fp32", "fp16", "bf16", "tf32"])}
        if status == "ok":
            row["seconds"] = rng.uniform(1e-4, 1e-2)
            row["flops"] = rng.uniform(1e9, 1e12)
            expected[name] = ("measured", row["flops"] / row["seconds"] / 1e12)
        else:
            expected[name] = (KINDS[status], None)
        rows.append(row)
    # Two rows alike but for the precision: projected onto another GPU they must differ.
    twin = {"repetition_index": 0, "status": "ok", "message": "", "mode": "graph", "seconds": 2e-3, "flops": 5e11}
    for precision in ("fp32", "fp16"):
        name = random_name(rng)
        rows.append(dict(twin, name=name, benchmark=name, precision=precision))
        expected[name] = ("measured", 5e11 / 2e-3 / 1e12)
        twin["twin_" + precision] = name
    path = os.path.join(out_dir, "random_names.json")
    json.dump({"context": context, "benchmarks": [], "gpucmp": {"schema_version": 1, "results": rows}}, open(path, "w"))
    out_csv = os.path.join(out_dir, "random_names.csv")
    subprocess.run([report, "compare", path, "--project", "l40s", "--csv", out_csv], check=True)
    cells = list(csv.DictReader(open(out_csv)))
    failures = 0

    def check(ok, what):
        nonlocal failures
        print(("ok   " if ok else "FAIL ") + what)
        failures += not ok

    measured = {c["benchmark"]: c for c in cells if c["gpu_key"] != "l40s"}
    projected = {c["benchmark"]: c for c in cells if c["gpu_key"] == "l40s"}
    for name, (kind, rate) in expected.items():
        cell = measured.get(name)
        check(cell is not None and cell["kind"] == kind, f"{name}: kind {kind} (got {cell and cell['kind']})")
        if rate is not None and cell is not None:
            check(abs(float(cell["rate"]) - rate) <= 1e-3 * rate and cell["rate_unit"] == "TFLOP/s",
                  f"{name}: {rate:.4g} TFLOP/s from its work and time (got {cell['rate']} {cell['rate_unit']})")
    a, b = projected.get(twin["twin_fp32"]), projected.get(twin["twin_fp16"])
    check(a is not None and b is not None and a["kind"] == b["kind"] == "projected" and a["seconds"] != b["seconds"],
          "the fp32 and fp16 twins project differently onto the L40S "
          f"({a and a['seconds']} s and {b and b['seconds']} s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
