#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: gpucmp contributors
"""No row projects faster onto a GPU that is slower in bandwidth and no faster to launch.

usage: projection_floor_check.py GPUCMP_REPORT SAXPY_JSON OUT_DIR

Projects the H200's saxpy results (results/h200/saxpy.json: 65536 to 268 M elements, cold and
hot) onto an A100 80GB SXM4 and checks in the CSV that every A100 cell is either slower than
the H200's (speedup below 1) or not projected as latency-bound, and that the smallest sizes
are the latter. Before the launch-latency rule, the 65536-element rows projected 7.4x faster.
"""
import csv
import os
import subprocess
import sys


def main():
    report, saxpy, out_dir = sys.argv[1:4]
    os.makedirs(out_dir, exist_ok=True)
    out = os.path.join(out_dir, "saxpy_a100.csv")
    subprocess.run([report, "compare", saxpy, "--project", "a100_80gb_sxm", "--csv", out], check=True)
    rows = list(csv.DictReader(open(out, encoding="utf-8")))
    failures, latency_bound = [], 0
    a100 = [row for row in rows if row["gpu_key"] == "a100_80gb_sxm"]
    for row in a100:
        if row["kind"] == "latency-bound":
            latency_bound += 1
        elif row["kind"] == "projected" and float(row["speedup"]) >= 1.0:
            failures.append(f"{row['benchmark']}: projected {float(row['speedup']):.2f}x faster on the A100")
        elif row["kind"] not in ("projected", "latency-bound"):
            failures.append(f"{row['benchmark']}: the A100 cell is '{row['kind']}'")
    if not any(row["benchmark"].endswith("/65536") and row["kind"] == "latency-bound" for row in a100):
        failures.append("the 65536-element rows are not latency-bound")
    if latency_bound == 0:
        failures.append("no row was latency-bound: the check would prove nothing")
    for line in failures:
        print("projection_floor_check: " + line)
    print("projection_floor_check: " + ("FAILED" if failures else
          f"{len(a100)} A100 cells: none projected faster than the H200, {latency_bound} latency-bound"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
