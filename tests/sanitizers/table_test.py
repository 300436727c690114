#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: gpucmp contributors
"""scripts/sanitize.sh --table: the whole table from the cells of several calls; and its
per-case runs, on a fake test binary under a fake compute-sanitizer; and the reliability
measures' sanitizer counts read from such a table.

The sanitizer table takes more device time than one session has, so each call's cells are
committed as a cells.tsv and merged later. This runs the merge on synthetic sources: a cells
folder and two cells.tsv files, a later source replacing a cell, a missing cell reading
"not run" (and failing), a "not run" from a later call replacing nothing, per-case cells
replacing an older call's shard cells, and a malformed line refused with a message naming the
file. Then each test case runs in a process of its own: names with ',', ';', quotes and '&'
reach Catch2 escaped, each cell is kept under its name's hash, [api_error] cases run with API
errors not reported, a test binary's failed checks or empty match are named in its cell, and a
call past GPUCMP_SANITIZE_STOP_AFTER_S leaves named "not run" cells. Last, the counts the
reliability acceptance reads (lab/acceptance/reliability_measures.py).
  table_test.py SANITIZE_SH RELIABILITY_ACCEPTANCE_PY
"""
import hashlib
import json
import os
import subprocess
import sys
import tempfile

script, acceptance = sys.argv[1], sys.argv[2]
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
programs = ["gpucmp_gpu_tests", "gpucmp_gbench_tests", "gpucmp_ops_tests", "gpucmp_models_tests", "gpucmp_multigpu_tests",
            "01_engine_custom_kernel", "02_gbench_kernel", "03_modes_side_by_side", "04_verified_ops", "05_serving_latency",
            "06_concurrency", "07_resnet50_table", "08_custom_cnn", "09_train_custom_cnn"]
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

    later = os.path.join(tmp, "later.tsv")
    with open(later, "w") as f:
        # A later call that did not reach racecheck of 08, and ran the ops tests' memcheck case
        # by case: the not-run cell keeps the earlier 0; the cases replace the earlier shards.
        f.write("racecheck\t08_custom_cnn\t1\tnot run\t0\n")
        f.write("memcheck\tgpucmp_ops_tests\tc0123456789\t0\t9\tevery GEMM verifies\n")
        f.write("memcheck\tgpucmp_ops_tests\tc9876543210\ttime limit (60 s)\t60\ta slow case\n")
        f.write("memcheck\tgpucmp_ops_tests\ta0123456789\tnot run\t0\tan api_error case\n")
    r, rows = table(os.path.join(tmp, "f"), folder, first, second, later)
    check(rows.get("08_custom_cnn", [None, None])[1] == "0", f"not run replaces nothing: {rows.get('08_custom_cnn')}")
    check(rows.get("gpucmp_ops_tests", [None])[0] == "0 + not run + time limit (60 s)",
          f"per-case cells replace shard cells: ops memcheck reads {rows.get('gpucmp_ops_tests')}")
    check(r.returncode != 0, "a time limit and a case not run must fail the table")

    bad = os.path.join(tmp, "bad.tsv")
    with open(bad, "w") as f:
        f.write("memcheck gpucmp_ops_tests 1s0 0\n")  # spaces, not tabs
    r, _ = table(os.path.join(tmp, "d"), bad)
    check(r.returncode == 2 and "bad.tsv" in r.stderr, f"a malformed line is refused naming the file: {r.stderr}")
    r, _ = table(os.path.join(tmp, "e"), os.path.join(tmp, "missing.tsv"))
    check(r.returncode == 2 and "missing.tsv" in r.stderr, f"a missing source is refused naming it: {r.stderr}")

# Per-case runs: a fake Catch2 v3 binary (it lists its cases in XML and records the test spec
# each run gets) under a fake tool that runs the program after its own options and reports 0
# errors, or sleeps first; no GPU needed.
names = ["a plain case", "a case, with a comma; and a semicolon", 'it\'s "quoted" & [bracketed]']
api_names = ["bad input is refused"]
# As Catch2 v3 lists them: one element a line, '&' and '<' escaped.
xml = lambda ns: "".join(f"  <TestCase>\n    <Name>{n.replace('&', '&amp;').replace('<', '&lt;')}</Name>\n  </TestCase>\n"
                         for n in ns)
fake_binary = f"""#!/bin/sh
case "$1" in
  --list-tests) case "$4" in
      "[gpu][api_error]"*) cat <<'END'
<MatchingTests>
{xml(api_names)}</MatchingTests>
END
      ;;
      *) cat <<'END'
<MatchingTests>
{xml(names)}</MatchingTests>
END
      ;;
    esac ;;
  *) printf '%s\\n' "$1" >> "$SPEC_LOG"
     # FAKE_VERDICTS: the first case fails 9 checks, the second matches nothing, the rest pass.
     if [ -n "${{FAKE_VERDICTS:-}}" ] && [ "$1" = "a plain case" ]; then
       echo "test cases: 1 | 1 failed"; echo "assertions: 103 | 94 passed | 9 failed"; exit 9
     elif [ -n "${{FAKE_VERDICTS:-}}" ] && [ "$1" = "a case\\, with a comma; and a semicolon" ]; then
       echo "No tests ran"; exit 2
     elif [ -n "${{FAKE_VERDICTS:-}}" ] && [ "$1" = "bad input is refused" ]; then
       exit 3
     fi
     echo "All tests passed" ;;
esac
"""
fake_tool = """#!/bin/sh
[ "$1" = --version ] && { echo "NVIDIA (R) Compute Sanitizer, Version 2025.3.1.0"; exit 0; }
api=""
while [ $# -gt 0 ] && ! [ -f "$1" ]; do
  case "$1" in --report-api-errors=*) api=${1#*=} ;; esac
  shift
done
[ -n "${TOOL_SLEEP:-}" ] && sleep "$TOOL_SLEEP"
printf '%s %s\\n' "$api" "$2" >> "$API_LOG"
"$@"
rc=$?
# FAKE_TOOL_OUTPUT: a log to print instead of a clean summary (the tool then exits 99).
[ -n "${FAKE_TOOL_OUTPUT:-}" ] && { cat "$FAKE_TOOL_OUTPUT"; exit 99; }
echo '========= ERROR SUMMARY: 0 errors'
exit $rc
"""


def part_of(kind, name):
    return kind + hashlib.md5(name.encode()).hexdigest()[:10]


with tempfile.TemporaryDirectory() as tmp:
    build = os.path.join(tmp, "build")
    os.makedirs(os.path.join(build, "tests"))
    path = os.path.join(build, "tests", "gpucmp_gpu_tests")
    with open(path, "w") as f:
        f.write(fake_binary)
    os.chmod(path, 0o755)
    tool_dir = os.path.join(tmp, "bin")
    os.mkdir(tool_dir)
    with open(os.path.join(tool_dir, "compute-sanitizer"), "w") as f:
        f.write(fake_tool)
    os.chmod(os.path.join(tool_dir, "compute-sanitizer"), 0o755)
    env = dict(os.environ, PATH=tool_dir + os.pathsep + os.environ["PATH"], GPUCMP_SANITIZE_TOOLS="memcheck",
               GPUCMP_SANITIZE_PROGRAMS="gpucmp_gpu_tests", SPEC_LOG=os.path.join(tmp, "specs"),
               API_LOG=os.path.join(tmp, "api"))
    out = os.path.join(tmp, "out")
    r = subprocess.run(["bash", script, out, build], capture_output=True, text=True, env=env)
    lines = [l.rstrip("\n").split("\t") for l in open(os.path.join(out, "cells.tsv"))] \
        if os.path.exists(os.path.join(out, "cells.tsv")) else []
    want = {part_of("c", n): n for n in names} | {part_of("a", n): n for n in api_names}
    got = {l[2]: l[5] for l in lines if len(l) == 6}
    check(got == want, f"one cell per case, under its name's hash, named: {got} {r.stderr[-300:]}")
    check(all(l[3] == "0" for l in lines), f"every case's cell reads 0: {lines}")
    specs = open(env["SPEC_LOG"]).read().splitlines() if os.path.exists(env["SPEC_LOG"]) else []
    check(sorted(specs) == sorted(["a plain case", "a case\\, with a comma; and a semicolon",
                                   'it\'s \\"quoted\\" & \\[bracketed\\]', "bad input is refused"]),
          f"each case's name reaches Catch2 escaped, as one argument: {specs}")
    api = open(env["API_LOG"]).read().splitlines() if os.path.exists(env["API_LOG"]) else []
    check(sorted(l.split(" ")[0] for l in api) == ["explicit"] * 3 + ["no"] and "no bad input is refused" in api,
          f"API errors are reported except in [api_error] cases: {api}")
    check("0 (4 runs)" in open(os.path.join(out, "sanitizers.md")).read(), "the table sums the cases")

    # A test binary's own verdict in the cell: failed checks, no test run, or a bare exit status.
    out = os.path.join(tmp, "verdicts")
    subprocess.run(["bash", script, out, build], capture_output=True, text=True, env=env | {"FAKE_VERDICTS": "1"})
    got = sorted(l.rstrip("\n").split("\t")[3] for l in open(os.path.join(out, "cells.tsv")))
    check(got == ["0", "0, 9 assertions failed", "0, exit 3", "0, no test ran"],
          f"failed checks and an empty match are named, other exits given as such: {got}")

    # A call past its stop time: the first case runs, the rest get named "not run" cells. The
    # script counts whole seconds: starting within 2 s and sleeping 3.5 s decide it on any clock.
    env |= {"TOOL_SLEEP": "3.5", "GPUCMP_SANITIZE_STOP_AFTER_S": "2"}
    out = os.path.join(tmp, "stopped")
    r = subprocess.run(["bash", script, out, build], capture_output=True, text=True, env=env)
    lines = [l.rstrip("\n").split("\t") for l in open(os.path.join(out, "cells.tsv"))]
    results = sorted(l[3] for l in lines)
    check(results == ["0", "not run", "not run", "not run"], f"one case ran, three were not reached: {results}")
    check(all(l[5] for l in lines), f"a case not reached is named: {lines}")
    check(r.returncode != 0, "cases not run fail the call")

    # racecheck in a vendor's kernel goes to the vendor table, with its libraries and the
    # command that reproduces it; in gpucmp's, it counts. memcheck counts in every kernel. The
    # tool's own error is the vendor table's too, and fails nothing.
    env = {k: v for k, v in env.items() if k not in ("TOOL_SLEEP", "GPUCMP_SANITIZE_STOP_AFTER_S")}
    races = os.path.join(tmp, "races.log")
    with open(races, "w") as f:
        f.write("========= Error: Race reported between Write access at nvjet_sm90_hsh_128x128(int)+0x1a0 in x.cu:3\n"
                "=========     and Read access at nvjet_sm90_hsh_128x128(int)+0x1c0 in x.cu:4 [64 hazards]\n"
                "========= Error: Race reported between Write access at void gpucmp::kernels::fill<float>(float*)+0x10 in k.cu:9\n"
                "=========     and Read access at void gpucmp::kernels::fill<float>(float*)+0x30 in k.cu:9 [2 hazards]\n"
                "========= Error: Race reported between Read access at cudnn_fused_conv(int)+0x20 in c.cu:1\n"
                "=========     and Write access at cudnn_fused_conv(int)+0x40 in c.cu:2 [8 hazards]\n"
                "========= RACECHECK SUMMARY: 3 hazards displayed (3 errors, 0 warnings)\n")
    out = os.path.join(tmp, "races")
    r = subprocess.run(["bash", script, out, build], capture_output=True, text=True,
                       env=env | {"GPUCMP_SANITIZE_TOOLS": "racecheck", "FAKE_TOOL_OUTPUT": races})
    cells_seen = sorted(l.split("\t")[3] for l in open(os.path.join(out, "cells.tsv")))
    check(cells_seen == ["1"] * 4, f"racecheck: gpucmp's race counts, the vendors' two do not: {cells_seen}")
    vendor = [l.rstrip("\n").split("\t") for l in open(os.path.join(out, "vendor.tsv"))]
    check(len(vendor) == 8 and {v[4] for v in vendor} == {"nvjet_sm90_hsh_128x128(int)", "cudnn_fused_conv(int)"}
          and all(v[3] == "vendor kernel" and "--tool racecheck" in v[7] and "gpucmp_gpu_tests" in v[7]
                  and "compute-sanitizer" in v[6] for v in vendor),
          f"each vendor finding: its kernel, libraries and command: {vendor[:2]}")
    md = open(os.path.join(out, "vendor.md")).read()
    check(md.count("| racecheck | gpucmp_gpu_tests |") == 8 and "`nvjet_sm90_hsh_128x128(int)`" in md,
          f"vendor.md lists the findings: {md[:400]}")
    check(r.returncode != 0, "gpucmp's own race fails the call")
    r = subprocess.run(["bash", script, os.path.join(tmp, "memcheck_vendor"), build], capture_output=True, text=True,
                       env=env | {"GPUCMP_SANITIZE_TOOLS": "memcheck", "FAKE_TOOL_OUTPUT": races})
    cells_seen = sorted(l.split("\t")[3] for l in open(os.path.join(tmp, "memcheck_vendor", "cells.tsv")))
    check(cells_seen == ["3"] * 4 and os.path.getsize(os.path.join(tmp, "memcheck_vendor", "vendor.tsv")) == 0,
          f"memcheck counts findings in every kernel: {cells_seen}")
    internal = os.path.join(tmp, "internal.log")
    with open(internal, "w") as f:
        f.write("========= Internal Sanitizer Error: The Sanitizer failed to handle a hardware exception\n"
                "========= ERROR SUMMARY: 1 error\n")
    out = os.path.join(tmp, "internal")
    r = subprocess.run(["bash", script, out, build], capture_output=True, text=True,
                       env=env | {"GPUCMP_SANITIZE_TOOLS": "synccheck", "FAKE_TOOL_OUTPUT": internal})
    cells_seen = sorted(l.split("\t")[3] for l in open(os.path.join(out, "cells.tsv")))
    vendor = [l.rstrip("\n").split("\t") for l in open(os.path.join(out, "vendor.tsv"))]
    check(cells_seen == ["tool error (1 counted)"] * 4 and len(vendor) == 4 and all(v[3] == "tool error" for v in vendor)
          and "Internal Sanitizer Error" in vendor[0][5], f"the tool's own error, in the vendor table: {cells_seen} {vendor[:1]}")
    check("4 runs ended in the tool's own error" in r.stdout, f"the tool's own errors are said: {r.stdout[-300:]}")
    everything = os.path.join(tmp, "everything.tsv")
    with open(everything, "w") as f:
        for t in tools:
            for p in programs:
                result = "tool error (1 counted)" if (t, p) == ("synccheck", "gpucmp_ops_tests") else "0"
                f.write(f"{t}\t{p}\t1\t{result}\t3\n")
    r, rows = table(os.path.join(tmp, "with_tool_error"), everything)
    check(r.returncode == 0 and rows.get("gpucmp_ops_tests", [None] * 3)[2] == "tool error (1 counted)",
          f"a table clean but for the tool's own error passes: {r.returncode} {rows.get('gpucmp_ops_tests')}")

    # --table: X.vendor.tsv beside X.tsv; a later source's run of the case replaces its findings.
    first, second = os.path.join(tmp, "one.tsv"), os.path.join(tmp, "two.tsv")
    with open(first, "w") as f:
        f.write("racecheck\tgpucmp_gpu_tests\tc0123456789\t0\t5\ta case\n"
                "racecheck\tgpucmp_gpu_tests\tc1111111111\t0\t5\tanother case\n")
    with open(os.path.join(tmp, "one.vendor.tsv"), "w") as f:
        f.write("racecheck\tgpucmp_gpu_tests\tc0123456789\tvendor kernel\tnvjet_a\tError: Race\tlibcublasLt.so.13.0\tcs ...\n"
                "racecheck\tgpucmp_gpu_tests\tc1111111111\tvendor kernel\tnvjet_b\tError: Race\tlibcublasLt.so.13.0\tcs ...\n")
    with open(second, "w") as f:
        f.write("racecheck\tgpucmp_gpu_tests\tc0123456789\t0\t5\ta case\n")
    with open(os.path.join(tmp, "two.vendor.tsv"), "w") as f:
        f.write("racecheck\tgpucmp_gpu_tests\tc0123456789\tvendor kernel\tnvjet_c\tError: Race\tlibcublasLt.so.13.1\tcs ...\n")
    table(os.path.join(tmp, "joined"), first, second)
    md = open(os.path.join(tmp, "joined", "vendor.md")).read()
    check("nvjet_c" in md and "nvjet_b" in md and "nvjet_a" not in md,
          f"the joined vendor table keeps each case's latest run: {md}")

# The reliability measures' sanitizer counts (lab/acceptance/reliability_measures.py), from a
# table with every kind of cell: what the row list lab/acceptance/reliability.json reads.
with tempfile.TemporaryDirectory() as tmp:
    os.makedirs(os.path.join(tmp, "in", "sanitize"))

    def sanitizer_counts(cells):
        with open(os.path.join(tmp, "in", "sanitize", "sanitizers.md"), "w") as f:
            f.write("| binary | memcheck | racecheck | synccheck | initcheck |\n|---|---|---|---|---|\n")
            f.write(f"| gpucmp_ops_tests | {' | '.join(cells)} |\n")
        r = subprocess.run([sys.executable, acceptance, os.path.dirname(os.path.dirname(script)), os.path.join(tmp, "out"),
                            os.path.join(tmp, "in")], capture_output=True, text=True)
        check(r.returncode == 0, f"reliability_measures.py ran: {r.stderr[-300:]}")
        return json.load(open(os.path.join(tmp, "out", "measures.json")))["sanitizers"]

    counts = sanitizer_counts(["0 (22 runs) + time limit (60 s)", "3 + not run x8", "0, exit 9 + tool error (1 counted) x7",
                               "0"])
    check(counts == {"errors": 3, "clean_runs": 24, "unclean_runs": 2, "not_run": 8, "tool_errors": 7},
          f"errors summed, runs counted by how they ended, the tool's own errors apart: {counts}")
    with open(os.path.join(tmp, "in", "sanitize", "vendor.md"), "w") as f:
        f.write("| tool | program | case | kind | kernel | finding | libraries | to reproduce |\n|---|---|---|---|---|---|---|---|\n"
                "| racecheck | 04_verified_ops | 1 | vendor kernel | `nvjet` | Error: Race | libcublasLt.so.13 | `cs` |\n")
    counts = sanitizer_counts(["0 (22 runs)", "0", "0 (3 runs)", "0"])
    check(counts == {"errors": 0, "clean_runs": 27, "unclean_runs": 0, "not_run": 0, "tool_errors": 0, "vendor_findings": 1},
          f"every run clean, one vendor finding beside: {counts}")
    # A check whose inputs are missing is left out, never filled in.
    r = subprocess.run([sys.executable, acceptance, os.path.dirname(os.path.dirname(script)), os.path.join(tmp, "empty")],
                       capture_output=True, text=True)
    check(r.returncode == 0 and json.load(open(os.path.join(tmp, "empty", "measures.json"))) == {},
          f"no inputs, no numbers: {r.stderr[-300:]}")

if failures:
    print("FAILED:\n  " + "\n  ".join(failures))
    sys.exit(1)
print("sanitize.sh: --table merges, replaces, keeps what a later not run missed and refuses bad sources; "
      "each case runs alone, escaped and named, its binary's verdict in the cell; the reliability measures count "
      "every kind of cell")
