#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: gpucmp contributors
"""A result file whose context says its GPU ran JIT-compiled PTX (gpu_code "ptx_jit") gets
its column flagged and the reason in the report's notes; the same file without it gets neither.

usage: ptx_jit_flag_check.py GPUCMP_REPORT INPUT.json OUT_DIR
"""
import json
import os
import subprocess
import sys


def report(binary, path, out):
    subprocess.run([binary, "compare", path, "--project", "l40s", "--markdown", out], check=True)
    return open(out, encoding="utf-8").read()


def main():
    binary, source, out_dir = sys.argv[1:4]
    os.makedirs(out_dir, exist_ok=True)
    doc = json.load(open(source, encoding="utf-8"))
    doc["context"]["gpu_code"] = "ptx_jit"
    doc["context"]["cuda_architectures"] = "800"
    flagged_path = os.path.join(out_dir, "ptx_jit.json")
    json.dump(doc, open(flagged_path, "w", encoding="utf-8"))
    flagged = report(binary, flagged_path, os.path.join(out_dir, "ptx_jit.md"))
    plain = report(binary, source, os.path.join(out_dir, "native.md"))
    failures = []
    if "(measured) ⚠ JIT-compiled PTX" not in flagged:
        failures.append("the measured column of a JIT-compiled run is not flagged")
    if "- ⚠ JIT-compiled PTX: the program measured on the" not in flagged:
        failures.append("the notes do not say what the flag means")
    if "JIT-compiled" in plain:
        failures.append("a file without gpu_code is flagged")
    for line in failures:
        print("ptx_jit_flag_check: " + line)
    print("ptx_jit_flag_check: " + ("FAILED" if failures else "flagged with its note; the plain file is not"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
