#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: gpucmp contributors
"""A gpucmp benchmark program's --help lists every --gpucmp_* flag it takes.

usage: gbench_help_check.py PROGRAM FLAGS_HPP

Runs PROGRAM --help (a GPUCMP_BENCHMARK_MAIN program: no GPU is needed to print it), and
checks that it exits 0, shows Google Benchmark's flags after gpucmp's, and names every flag
that take_gpucmp_flags in FLAGS_HPP (include/gpucmp/gbench/flags.hpp) parses.
"""
import re
import subprocess
import sys


def main():
    program, flags_hpp = sys.argv[1:3]
    source = open(flags_hpp, encoding="utf-8").read()
    parser = source[source.index("inline gpucmp_flags take_gpucmp_flags"):]
    taken = sorted(set(re.findall(r'"(--gpucmp_[a-z_]+)=?"', parser)) - {"--gpucmp_"})
    done = subprocess.run([program, "--help"], capture_output=True, text=True, timeout=60)
    shown = set(re.findall(r"(--gpucmp_[a-z_]+)", done.stdout))
    failures = []
    if done.returncode != 0:
        failures.append(f"--help exited {done.returncode}: {done.stderr[-500:]}")
    if len(taken) < 10:
        failures.append(f"found only {len(taken)} flags in {flags_hpp}: the check would prove little")
    failures += [f"{flag} is taken but --help does not list it" for flag in taken if flag not in shown]
    if "--benchmark_filter" not in done.stdout:
        failures.append("Google Benchmark's own flags are missing from --help")
    for line in failures:
        print("gbench_help_check: " + line)
    print("gbench_help_check: " + ("FAILED" if failures else f"--help lists all {len(taken)} gpucmp flags and Google Benchmark's"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
