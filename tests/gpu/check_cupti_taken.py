#!/usr/bin/env python3
"""Runs tests/gpu/cupti_taken.cpp with CUPTI free and with CUPTI taken, and checks each.

usage: check_cupti_taken.py CUPTI_TAKEN_BINARY OUT_DIR
1. CUPTI free: every mode, kernel mode included, is measured (the premise: CUPTI works here).
2. CUPTI taken by another subscriber in the process (GPUCMP_TEST_TAKE_CUPTI=1): kernel mode
   is a typed unsupported that names the other subscriber; hot, cold and graph are measured;
   the run exits 0 (unsupported is a typed result, not a failure).
3. Where compute-sanitizer is on the PATH, the same under it (a tool that holds CUPTI):
   kernel mode is a typed unsupported and the other modes are measured.
Exit 0: every check passed; 1: one failed (each is printed); 77: no CUDA device.
"""
import os
import shutil
import subprocess
import sys

from result_rows import Checks, error_of, measured, rows_of, status_of

OTHER_MODES = ("hot", "cold", "graph")


def run(cmd, out, env_extra):
    env = dict(os.environ, **env_extra)
    done = subprocess.run(cmd + [f"--benchmark_out={out}", "--benchmark_out_format=json"], env=env,
                          capture_output=True, text=True, timeout=600)
    try:
        rows = rows_of(out)[0]
    except (OSError, ValueError, KeyError):
        rows = {}
    return done, rows


def main():
    binary, out_dir = sys.argv[1], sys.argv[2]
    os.makedirs(out_dir, exist_ok=True)
    check = Checks()

    def spin_measured(rows, mode):
        return measured(rows.get(f"cupti_taken/spin/{mode}"))

    def spin_error(rows, mode):
        return error_of(rows.get(f"cupti_taken/spin/{mode}"))

    free, rows = run([binary], os.path.join(out_dir, "cupti_free.json"), {})
    if free.returncode == 77:
        print("SKIPPED: no CUDA device")
        return 77
    check(free.returncode == 0, f"with CUPTI free the run exits 0 (exit {free.returncode})")
    for mode in ("kernel",) + OTHER_MODES:
        check(spin_measured(rows, mode), f"with CUPTI free, {mode} mode is measured {spin_error(rows, mode)!r}")

    taken, rows = run([binary], os.path.join(out_dir, "cupti_taken.json"), {"GPUCMP_TEST_TAKE_CUPTI": "1"})
    check(taken.returncode == 0, f"with CUPTI taken the run exits 0 (exit {taken.returncode})")
    kernel = spin_error(rows, "kernel")
    check(status_of(rows.get("cupti_taken/spin/kernel")) == "unsupported" and "CUPTI is already taken" in kernel,
          f"with CUPTI taken, kernel mode is a typed unsupported ({kernel!r})")
    check("gpucmp cupti_taken test" in kernel, "the message names the other subscriber")
    for mode in OTHER_MODES:
        check(spin_measured(rows, mode), f"with CUPTI taken, {mode} mode is still measured {spin_error(rows, mode)!r}")

    sanitizer = shutil.which("compute-sanitizer")
    if sanitizer is None:
        print("note: compute-sanitizer is not on the PATH; the run under a tool that holds CUPTI is left out")
    else:
        tool, rows = run([sanitizer, "--tool", "memcheck", "--error-exitcode", "3", binary],
                         os.path.join(out_dir, "cupti_under_sanitizer.json"), {})
        check(tool.returncode == 0, f"under compute-sanitizer the run exits 0 (exit {tool.returncode})")
        kernel = spin_error(rows, "kernel")
        check(status_of(rows.get("cupti_taken/spin/kernel")) == "unsupported" and "kernel mode unavailable" in kernel,
              f"under compute-sanitizer, kernel mode is a typed unsupported ({kernel!r})")
        for mode in OTHER_MODES:
            check(spin_measured(rows, mode), f"under compute-sanitizer, {mode} mode is measured {spin_error(rows, mode)!r}")
        if check.failures:
            print(tool.stdout[-2000:], tool.stderr[-2000:])
    if check.failures:
        print(taken.stderr[-3000:])
    return 1 if check.failures else 0


if __name__ == "__main__":
    sys.exit(main())
