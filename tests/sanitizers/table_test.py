#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: gpucmp contributors
"""scripts/sanitize.sh --table: the whole table from the cells of several calls; and its
sharding, on fake test binaries under a fake compute-sanitizer.

The sanitizer table takes more device time than one session has, so each call's cells are
committed as a cells.tsv and merged later. This runs the merge on synthetic sources: a cells
folder and two cells.tsv files, a later source replacing a cell, a missing cell reading
"not run" (and failing), and a malformed line refused with a message naming the file. Then a
binary with 3 test cases gets 3 shards, not GPUCMP_SANITIZE_SHARDS' 4 (an empty shard ends
"No tests ran", exit 2, which read as a failure on the H200), and one with 10 gets 4.
  table_test.py SANITIZE_SH
"""
import os
import subprocess
import sys
import tempfile

script = sys.argv[1]
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


def table(out, *sources):
    r = subprocess.run(["bash", script, "--table", out, *sources], capture_output=True, text=True)
    rows = {}
    path = os.path.join(out, "sanitizers.md")
    if os.path.exists(path):
        for line in open(path):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) == 5 and cells[0] not in ("binary", "---"):
                rows[cells[0]] = cells[1:]
    return r, rows


tools = ["memcheck", "racecheck", "synccheck", "initcheck"]
programs = ["gpucmp_gpu_tests", "gpucmp_gbench_tests", "gpucmp_ops_tests", "gpucmp_models_tests",
            "01_engine_custom_kernel", "03_modes_side_by_side", "04_verified_ops", "05_serving_latency",
            "06_concurrency", "07_resnet50_table", "08_custom_cnn"]
with tempfile.TemporaryDirectory() as tmp:
    folder = os.path.join(tmp, "cells")
    os.mkdir(folder)
    with open(os.path.join(folder, "memcheck.gpucmp_gpu_tests.1s0"), "w") as f:
        f.write("0\n")
    first = os.path.join(tmp, "first.tsv")
    second = os.path.join(tmp, "second.tsv")
    with open(first, "w") as f:
        # Every cell but racecheck of example 08; the ops tests' memcheck over its limit.
        for t in tools:
            for p in programs:
                if (t, p) == ("racecheck", "08_custom_cnn"):
                    continue
                result = "time limit (300 s)" if (t, p) == ("memcheck", "gpucmp_ops_tests") else "0"
                f.write(f"{t}\t{p}\t1s0\t{result}\t12\n")
        f.write("memcheck\tgpucmp_models_tests\t2\t0\t5\n")
    with open(second, "w") as f:
        f.write("memcheck\tgpucmp_ops_tests\t1s0\t0\t410\n")  # a later call, a longer limit
        f.write("memcheck\tgpucmp_ops_tests\t1s1\t2\t380\n")

    r, rows = table(os.path.join(tmp, "a"), folder, first)
    check(r.returncode != 0, "a cell not run and a time limit must fail the table")
    check(rows.get("08_custom_cnn", [None, None])[1] == "not run", f"racecheck of 08 reads {rows.get('08_custom_cnn')}")
    check(rows.get("gpucmp_ops_tests", [None])[0] == "time limit (300 s)", f"ops memcheck reads {rows.get('gpucmp_ops_tests')}")
    check(rows.get("gpucmp_models_tests", [None])[0] == "0 (2 runs)", f"models memcheck reads {rows.get('gpucmp_models_tests')}")

    r, rows = table(os.path.join(tmp, "b"), folder, first, second)
    check(rows.get("gpucmp_ops_tests", [None])[0] == "2 (2 runs)",
          f"the later source replaces a cell and adds a shard: ops memcheck reads {rows.get('gpucmp_ops_tests')}")
    check(r.returncode != 0, "2 errors must fail the table")

    with open(second, "w") as f:
        f.write("memcheck\tgpucmp_ops_tests\t1s0\t0\t410\n")
        f.write("racecheck\t08_custom_cnn\t1\t0\t30\n")
    r, rows = table(os.path.join(tmp, "c"), folder, first, second)
    check(r.returncode == 0, f"every cell 0 must pass: {r.stdout[-300:]}{r.stderr[-300:]}")
    check(all(c in ("0", "0 (2 runs)") for p in programs for c in rows.get(p, ["missing"])),
          f"every cell 0: {rows}")
    check("0 errors" in r.stdout, "the verdict line says 0 errors")

    bad = os.path.join(tmp, "bad.tsv")
    with open(bad, "w") as f:
        f.write("memcheck gpucmp_ops_tests 1s0 0\n")  # spaces, not tabs
    r, _ = table(os.path.join(tmp, "d"), bad)
    check(r.returncode == 2 and "bad.tsv" in r.stderr, f"a malformed line is refused naming the file: {r.stderr}")
    r, _ = table(os.path.join(tmp, "e"), os.path.join(tmp, "missing.tsv"))
    check(r.returncode == 2 and "missing.tsv" in r.stderr, f"a missing source is refused naming it: {r.stderr}")

# Sharding: fake Catch2 v3 binaries (they answer --help and --list-tests) and a fake tool that
# runs nothing and reports 0 errors; no GPU needed.
fake_binary = """#!/bin/sh
case "$1" in
  --help) echo "  --shard-count <shard count>" ;;
  --list-tests) echo "CASES matching test cases" ;;
  *) echo "All tests passed" ;;
esac
"""
with tempfile.TemporaryDirectory() as tmp:
    build = os.path.join(tmp, "build")
    os.makedirs(os.path.join(build, "tests"))
    for name, cases in (("gpucmp_gbench_tests", 3), ("gpucmp_gpu_tests", 10)):
        path = os.path.join(build, "tests", name)
        with open(path, "w") as f:
            f.write(fake_binary.replace("CASES", str(cases)))
        os.chmod(path, 0o755)
    tool_dir = os.path.join(tmp, "bin")
    os.mkdir(tool_dir)
    with open(os.path.join(tool_dir, "compute-sanitizer"), "w") as f:
        f.write("#!/bin/sh\necho '========= ERROR SUMMARY: 0 errors'\n")
    os.chmod(os.path.join(tool_dir, "compute-sanitizer"), 0o755)
    env = dict(os.environ, PATH=tool_dir + os.pathsep + os.environ["PATH"], GPUCMP_SANITIZE_TOOLS="memcheck",
               GPUCMP_SANITIZE_PROGRAMS="gpucmp_gbench_tests gpucmp_gpu_tests", GPUCMP_SANITIZE_SHARDS="4")
    out = os.path.join(tmp, "out")
    r = subprocess.run(["bash", script, out, build], capture_output=True, text=True, env=env)
    lines = [l.split("\t") for l in open(os.path.join(out, "cells.tsv"))] if os.path.exists(os.path.join(out, "cells.tsv")) else []
    parts = {name: sorted(l[2] for l in lines if l[1] == name) for name in ("gpucmp_gbench_tests", "gpucmp_gpu_tests")}
    check(parts["gpucmp_gbench_tests"] == ["1s0", "1s1", "1s2"], f"3 test cases, 3 shards: {parts} {r.stderr[-300:]}")
    check(parts["gpucmp_gpu_tests"] == ["1s0", "1s1", "1s2", "1s3"], f"10 test cases, 4 shards: {parts}")
    check(all(l[3] == "0" for l in lines), f"every shard's cell reads 0: {lines}")

if failures:
    print("FAILED:\n  " + "\n  ".join(failures))
    sys.exit(1)
print("sanitize.sh: --table merges, replaces, reads not run and refuses bad sources; shards follow the test cases")
