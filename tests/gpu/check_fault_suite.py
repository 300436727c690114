#!/usr/bin/env python3
"""Runs the fault suite (tests/gpu/fault_suite.cpp) and checks how each fault ended.

usage: check_fault_suite.py FAULT_SUITE_BINARY OUT_DIR
It runs with --gpucmp_timeout_s=2, --gpucmp_power and GPUCMP_NVML_LIBRARY pointing at a
library that does not exist (a machine without NVML). Exit 0: every check passed; 1: one
failed (each is printed); 77: no CUDA device (the binary said so).
"""
import os
import subprocess
import sys

from result_rows import Checks, error_of, measured, rows_of, status_of


def main():
    binary, out_dir = sys.argv[1], sys.argv[2]
    os.makedirs(out_dir, exist_ok=True)
    out = os.path.join(out_dir, "fault_suite.json")
    env = dict(os.environ, GPUCMP_NVML_LIBRARY="/nonexistent/libnvidia-ml.so.1")
    run = subprocess.run([binary, "--gpucmp_timeout_s=2", "--gpucmp_power", f"--benchmark_out={out}",
                          "--benchmark_out_format=json"], env=env, capture_output=True, text=True, timeout=300)
    if run.returncode == 77:
        print("SKIPPED: no CUDA device")
        return 77
    check = Checks()
    check(run.returncode == 1, f"the run exits 1 after a failure (exit {run.returncode})")
    check("fault/5_trap/hot" in run.stderr, "stderr names the benchmark that failed")
    check("context was lost after an error in fault/5_trap/hot" in run.stderr, "stderr says the CUDA context was lost")
    try:
        rows, labels = rows_of(out)
    except (OSError, ValueError, KeyError) as e:
        check(False, f"the JSON output is complete and valid ({e})")
        print(run.stdout[-3000:], run.stderr[-3000:])
        return 1

    check(measured(rows.get("fault/1_before/hot")), "the benchmark before every fault is measured")
    before = rows.get("fault/1_before/hot")
    check(before is not None and before.power_w is None, "without NVML there are no power columns")
    check("NVML not available" in labels.get("fault/1_before/hot", ""), "without NVML the label says why power is missing")
    check(measured(rows.get("fault/2_sweep/hot/1048576")), "the sweep's first size is measured")
    check(status_of(rows.get("fault/2_sweep/hot/1125899906842624")) == "oom",
          "the size that does not fit is a typed oom cell")
    check(measured(rows.get("fault/2_sweep/hot/2097152")), "the sweep goes on after the oom")
    slow = rows.get("fault/3_slow/hot")
    check(status_of(slow) == "timeout" and "2 s budget" in error_of(slow),
          f"the slow benchmark is a typed timeout ({status_of(slow)}: {error_of(slow)!r})")
    check(measured(rows.get("fault/4_after_timeout/hot")), "the run goes on after the timeout")
    trap = rows.get("fault/5_trap/hot")
    check(status_of(trap) == "failed" and "CUDA error" in error_of(trap), "the trap is a failed cell")
    after = rows.get("fault/6_after_trap/hot")
    check(status_of(after) == "skipped" and "the CUDA context was lost" in error_of(after),
          "after the trap the rest is skipped without the GPU")
    if check.failures:
        print(run.stderr[-3000:])
    return 1 if check.failures else 0


if __name__ == "__main__":
    sys.exit(main())
