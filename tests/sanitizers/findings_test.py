#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: gpucmp contributors
"""scripts/reliability/sanitizer_findings.py: whose each compute-sanitizer finding is, on
synthetic logs in the tool's two location styles (CUDA 11's "at 0x50 in kernel", 12's
"at kernel+0x50 in file"). A finding in a vendor's kernel is the vendor's; one in gpucmp's or
saxpy, one that names no kernel (a leak, a host frame) and one the print limit cut stay
gpucmp's; racecheck's warnings are not in its error count and excuse nothing.
  findings_test.py SANITIZER_FINDINGS_PY
"""
import os
import subprocess
import sys
import tempfile

script = sys.argv[1]
failures = []


def sorted_findings(log, reported):
    with tempfile.NamedTemporaryFile("w", suffix=".log", delete=False) as f:
        f.write(log)
    try:
        r = subprocess.run([sys.executable, script, f.name, str(reported)], capture_output=True, text=True)
    finally:
        os.unlink(f.name)
    if r.returncode != 0:
        failures.append(f"exit {r.returncode}: {r.stderr}")
        return None, []
    lines = r.stdout.splitlines()
    return int(lines[0]), [tuple(l.split("\t")) for l in lines[1:]]


def check(cond, what):
    if not cond:
        failures.append(what)


own, vendor = sorted_findings(
    "========= Barrier error detected. Divergent thread(s) in warp\n"
    "=========     at 0x2f0 in cudnn::bn_fw_tr_1C11_kernel_NCHW(float*)\n"
    "=========     by thread (0,0,0) in block (0,0,0)\n"
    "========= Barrier error detected. Divergent thread(s) in warp\n"
    "=========     at 0x100 in void gpucmp::kernels::reduce<float>(float const*)\n"
    "========= ERROR SUMMARY: 2 errors\n", 2)
check((own, [v[0] for v in vendor]) == (1, ["cudnn::bn_fw_tr_1C11_kernel_NCHW(float*)"]),
      f"CUDA 11 style: one vendor's, one gpucmp's: {own} {vendor}")

own, vendor = sorted_findings(
    "========= Error: Race reported between Write access at nvjet_sm90_tst(int)+0x1a0 in a.cu:3\n"
    "=========     and Read access at nvjet_sm90_tst(int)+0x1c0 in a.cu:4 [16 hazards]\n"
    "========= Warning: Race reported between Read access at cutlass_kernel(int)+0x10 in b.cu:1\n"
    "=========     and Write access at cutlass_kernel(int)+0x20 in b.cu:2 [4 hazards]\n"
    "========= Error: Race reported between Write access at saxpy(int, float)+0x10 in c.cu:5\n"
    "=========     and Read access at saxpy(int, float)+0x20 in c.cu:5 [2 hazards]\n"
    "========= RACECHECK SUMMARY: 3 hazards displayed (2 errors, 1 warning)\n", 2)
check((own, [v[0] for v in vendor]) == (1, ["nvjet_sm90_tst(int)"]),
      f"CUDA 12 style: the vendor's error aside, the warning excuses nothing, saxpy is ours: {own} {vendor}")
check(vendor and vendor[0][1].startswith("Error: Race reported"), f"the finding's first line comes along: {vendor}")

own, vendor = sorted_findings(
    "========= Leaked 1024 bytes at 0x7f0000000000\n"
    "=========     Saved host backtrace up to driver entry point at allocation time\n"
    "=========         Host Frame: cudaMalloc [0x1234] in libcudart.so.13\n"
    "========= ERROR SUMMARY: 1 error\n", 1)
check((own, vendor) == (1, []), f"a leak names no kernel and stays gpucmp's: {own} {vendor}")

own, vendor = sorted_findings(
    "========= Error: Race reported between Write access at nvjet_a(int)+0x10 in a.cu:1\n"
    "========= Error: Race reported between Write access at nvjet_b(int)+0x10 in a.cu:1\n"
    "========= RACECHECK SUMMARY: 2 hazards displayed (5 errors, 0 warnings)\n", 5)
check(own == 3 and len(vendor) == 2, f"the findings the print limit cut stay gpucmp's: {own} {vendor}")

r = subprocess.run([sys.executable, script, "missing.log"], capture_output=True, text=True)
check(r.returncode != 0 and "usage" in r.stderr, f"a call without the count is refused with the usage: {r.stderr[:200]}")

if failures:
    print("FAILED:\n  " + "\n  ".join(failures))
    sys.exit(1)
print("sanitizer_findings.py: vendors' findings apart, gpucmp's and every unnamed one counted, in both log styles")
