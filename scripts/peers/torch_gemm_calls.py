#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: gpucmp contributors
"""Which cuBLAS/cuBLASLt call PyTorch makes for each 8192^3 GEMM of the comparison.

Runs each operation of torch_ops.py's "gemm" part once, each in its own process with
cuBLASLt's API log (CUBLASLT_LOG_LEVEL=5) and cuBLAS's (CUBLAS_LOGINFO_DBG=1) on, and keeps
the matmul lines: operand types, layouts, compute type, workspace and the algorithm id the
heuristic returned; then runs the call once more under torch.profiler for the names of the
kernels it launches (the id does not say the tile; the kernel's name does). The table then
shows whether both sides ran the same call and the same kernel. Without this the FP8 E5M2
row compared A=E5M2 x B=E4M3 (gpucmp) with PyTorch's opposite operand order.

Usage: torch_gemm_calls.py --out torch_gemm_calls.json
Writes {"<key>": ["log line", ..., "kernel: <name>", ...]}; keys match compare-ops.py's.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

SIZE = 8192
KEYS = [f"gemm/{d}/{SIZE}x{SIZE}x{SIZE}" for d in ("fp32", "tf32", "fp16", "bf16")] + [
    f"gemm/{d}/{SIZE}x{SIZE}x{SIZE}_tn" for d in ("fp8_e4m3", "fp8_e5m2")]
KEPT = ("Matmul", "Gemm", "gemm", "algo")


def run_one(key):
    """In a child process: one call of the operation torch_ops.py times for `key`."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import torch
    import torch_ops

    dtype = key.split("/")[1]
    if dtype.startswith("fp8"):
        fn = torch_ops.fp8_call(SIZE, dtype)
    else:
        fn = torch_ops.gemm_call(SIZE, SIZE, SIZE, False, False, dtype)
    fn()
    torch.cuda.synchronize()
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    names = []
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA and not event.name.startswith(("Memcpy", "Memset")):
            if event.name not in names:
                names.append(event.name)
    for name in names:
        print("kernel: " + name)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # the child's key
    args = parser.parse_args()
    if args.one:
        run_one(args.one)
        return 0
    if not args.out:
        parser.error("--out is required")
    calls = {}
    status = 0
    for key in KEYS:
        with tempfile.TemporaryDirectory() as tmp:
            lt_log, blas_log = os.path.join(tmp, "cublaslt.log"), os.path.join(tmp, "cublas.log")
            env = dict(os.environ, CUBLASLT_LOG_LEVEL="5", CUBLASLT_LOG_FILE=lt_log, CUBLAS_LOGINFO_DBG="1",
                       CUBLAS_LOGDEST_DBG=blas_log)
            child = subprocess.run([sys.executable, os.path.abspath(__file__), "--one", key], env=env,
                                   capture_output=True, text=True)
            if child.returncode != 0:
                print(f"torch_gemm_calls: {key}: {child.stderr.strip()[-500:]}", file=sys.stderr)
                status = 1
            lines = [line for line in child.stdout.splitlines() if line.startswith("kernel: ")]
            for path in (blas_log, lt_log):
                if os.path.exists(path):
                    with open(path, errors="replace") as f:
                        lines += [line.rstrip() for line in f if any(k in line for k in KEPT)]
            calls[key] = lines
            print(f"torch_gemm_calls: {key}: {len(lines)} matmul log lines")
    with open(args.out, "w") as f:
        json.dump(calls, f, indent=1)
    return status


if __name__ == "__main__":
    sys.exit(main())
