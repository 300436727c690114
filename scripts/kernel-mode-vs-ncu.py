#!/usr/bin/env python3
"""Kernel mode against Nsight Compute on the same verified cuBLAS GEMM.

Runs benchmarks/gemm_kernel_mode in kernel mode (CUPTI timestamps, in process), then the same
program in --plain mode under `ncu --clock-control none --metrics gpu__time_duration.sum`
(Nsight Compute cannot profile a process that traces with CUPTI itself), and writes a
markdown table comparing the medians.

usage: kernel-mode-vs-ncu.py BUILD_DIR OUT_DIR [--size N]
"""
import csv
import glob
import io
import json
import os
import shutil
import statistics
import subprocess
import sys

UNIT_TO_S = {"ns": 1e-9, "nsecond": 1e-9, "us": 1e-6, "usecond": 1e-6, "ms": 1e-3, "msecond": 1e-3, "s": 1.0,
             "second": 1.0}


def find_ncu():
    found = shutil.which("ncu")
    if found:
        return found
    candidates = sorted(glob.glob("/opt/nvidia/nsight-compute/*/ncu") + glob.glob("/usr/local/cuda/bin/ncu"))
    return candidates[-1] if candidates else None


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    build_dir, out_dir = sys.argv[1], sys.argv[2]
    size = sys.argv[4] if len(sys.argv) > 4 and sys.argv[3] == "--size" else "8192"
    program = os.path.join(build_dir, "benchmarks", "gemm_kernel_mode")
    os.makedirs(out_dir, exist_ok=True)

    subprocess.run([program, "--size", size, "--out", out_dir], check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(out_dir, "gemm_kernel_mode.json")) as f:
        ours = json.load(f)

    ncu = find_ncu()
    if ncu is None:
        sys.exit("kernel-mode-vs-ncu: Nsight Compute (ncu) not found")
    run = subprocess.run([ncu, "--clock-control", "none", "--metrics", "gpu__time_duration.sum", "--csv",
                          "--launch-skip", "3", "--launch-count", "15", program, "--plain", "18", "--size", size],
                         capture_output=True, text=True)
    with open(os.path.join(out_dir, "ncu_gemm.csv"), "w") as f:
        f.write(run.stdout + run.stderr)
    if run.returncode != 0:
        sys.exit(f"kernel-mode-vs-ncu: ncu failed ({run.returncode}):\n{run.stderr[-2000:]}")
    lines = run.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith('"ID"'))
    durations = {}
    for row in csv.DictReader(io.StringIO("\n".join(lines[header:]))):
        if row["Metric Name"] == "gpu__time_duration.sum":
            value = float(row["Metric Value"].replace(",", "")) * UNIT_TO_S[row["Metric Unit"]]
            durations.setdefault(row["Kernel Name"], []).append(value)
    if not durations:
        sys.exit("kernel-mode-vs-ncu: no gpu__time_duration values in the ncu output")
    # One GEMM is one kernel here; the busy time of a launch is the sum over its kernels.
    ncu_median = sum(statistics.median(v) for v in durations.values())
    ours_median = ours["kernel_busy_median_s"]
    ratio = ours_median / ncu_median
    table = [
        f"BF16 GEMM {size}^3 (cuBLAS, verified) on {ours['gpu']}: kernel mode against Nsight Compute",
        "",
        "| measure | median us | kernels |",
        "|---|---|---|",
        f"| gpucmp kernel mode (CUPTI, in process, back to back) | {ours_median * 1e6:.2f} | {', '.join('`' + n + '`' for n in ours['kernel_names'])} |",
        f"| Nsight Compute gpu__time_duration.sum (--clock-control none, {sum(len(v) for v in durations.values())} launches) | {ncu_median * 1e6:.2f} | {', '.join('`' + n + '`' for n in durations)} |",
        f"| gpucmp graph mode (events) | {ours['graph_median_s'] * 1e6:.2f} | |",
        "",
        f"Kernel mode / Nsight Compute = {ratio:.4f} ({(ratio - 1) * 100:+.2f}%).",
    ]
    text = "\n".join(table) + "\n"
    with open(os.path.join(out_dir, "kernel_mode_vs_ncu.md"), "w") as f:
        f.write(text)
    print(text)
    if abs(ratio - 1) > 0.02:
        sys.exit("kernel-mode-vs-ncu: kernel mode differs from Nsight Compute by more than 2%")


if __name__ == "__main__":
    main()
