#!/usr/bin/env python3
"""The architecture issue's acceptance rows, computed from the tree and from run outputs.

usage: acceptance.py REPO_ROOT OUT_DIR [--compat FILE] [--h200-compat FILE] [--report GPUCMP_REPORT]
Writes OUT_DIR/acceptance.json (a list of {row, measured, target, unit, pass}) and
OUT_DIR/summary.md. Rows measured on the tree are always made; rows that need a run are
made only from the files given, never filled in:
  --compat FILE       scripts/gbench-compat.sh's table (build-gbench/compat.md)
  --h200-compat FILE  the same table from the H200 (Google Benchmark 1.8.3 there)
  --report BINARY     gpucmp-report, for the random-names test of the report's reader
The H200 comparison rows (ops and ResNet-50 within 2 % of their committed ratios, the spin
table, the searches' choices) are added when those runs are made on the new contract.
"""
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from acceptance_rows import Rows  # noqa: E402  (scripts/acceptance_rows.py)


def grep(root, pattern, paths):
    """Lines under paths (relative to root) matching the regex pattern: [(file, line)]."""
    hits = []
    rx = re.compile(pattern)
    for base in paths:
        for folder, _, names in os.walk(os.path.join(root, base)):
            for name in names:
                path = os.path.join(folder, name)
                try:
                    for number, line in enumerate(open(path, encoding="utf-8", errors="replace"), start=1):
                        if rx.search(line):
                            hits.append((os.path.relpath(path, root), number))
                except OSError:
                    continue
    return hits


def compat_rows(path):
    rows = {}
    for line in open(path):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0] not in ("Google Benchmark", "---"):
            rows[cells[0]] = cells[1] == "PASS" and cells[2] == "PASS" and "FAIL" not in cells[3]
    return rows


def main():
    args = sys.argv[1:]
    if len(args) < 2:
        sys.exit(__doc__)
    root, out = args[0], args[1]
    options = dict(zip(args[2::2], args[3::2]))
    rows = Rows()
    row = rows.add

    internal = grep(root, r"benchmark::internal", ["include"])
    row("lines in include/ that name benchmark::internal", len(internal), 0, "lines", not internal)
    if "--compat" in options:
        c = compat_rows(options["--compat"])
        wanted = ["system", "1.9.5", "267a1115"]
        passed = [v for v in wanted if c.get(v)]
        row("plain and fixture benchmarks build and pass the adapter's host tests against Google Benchmark "
            "1.7.1 (system), 1.9.5 and main 267a1115", len(passed), len(wanted), "versions", len(passed) == len(wanted))
    if "--h200-compat" in options:
        c = compat_rows(options["--h200-compat"])
        row("the same on the H200 against its Google Benchmark 1.8.3", int(bool(c.get("system"))), 1, "passed",
            c.get("system"))
    timing = grep(root, r"cudaEventRecord|cudaStreamBeginCapture|time_back_to_back", ["include/gpucmp/ops", "include/gpucmp/models"])
    row("timing outside the engine: cudaEventRecord, graph capture or time_back_to_back in ops/ and models/",
        len(timing), 0, "lines", not timing)
    # The report's reader of result files (parse_result_file; the legacy reader serves only
    # `gpucmp-report upgrade`): what in it parses a name, a message or a rate counter.
    model = open(os.path.join(root, "tools", "report", "model.hpp")).read()
    start = model.find("inline result_file parse_result_file(")
    body = model[start:model.find("\n}\n", start)] if start >= 0 else ""
    prose = len(re.findall(r"precision_of\(|kind_of_error\(|clean_name\(|\"TFLOP/s\"|\"GB/s\"|error_message", body))
    random_ok = None
    if "--report" in options:  # the random-names test: status, precision and work from the fields
        with tempfile.TemporaryDirectory() as t:
            done = subprocess.run([sys.executable, os.path.join(root, "tests", "report", "random_names_check.py"),
                                   options["--report"], os.path.join(root, "tests", "report", "inputs", "h200_suite.json"), t],
                                  capture_output=True, text=True)
            random_ok = done.returncode == 0
    row("the report taking facts from names or messages: name, message or rate-counter parsing in its reader"
        + ("" if random_ok is None else f" (random-names test {'passed' if random_ok else 'FAILED'})"),
        prose, 0, "calls", bool(body) and prose == 0 and random_ok is not False)
    results = subprocess.run([sys.executable, os.path.join(root, "scripts", "check-results.py"), root],
                             capture_output=True, text=True)
    size = re.search(r"(\d+) files, (\d+) bytes", results.stdout)
    row("results/ at most 1 MB, every file named by a doc, script or test",
        int(size.group(2)) if size else -1, 1_000_000, "bytes", results.returncode == 0)
    top = sorted(n for n in os.listdir(os.path.join(root, "include", "gpucmp"))
                 if os.path.isfile(os.path.join(root, "include", "gpucmp", n)))
    extra = [n for n in top if n not in ("bench.hpp", "core.hpp", "version.hpp")]
    row("headers at the top of include/gpucmp/ other than the umbrellas and version.hpp", len(extra), 0, "headers",
        not extra)
    layers = subprocess.run([sys.executable, os.path.join(root, "scripts", "check-include-layers.py"), root],
                            capture_output=True, text=True)
    row("includes that point up a layer (scripts/check-include-layers.py)",
        layers.stdout.count("an include may not point up"), 0, "includes", layers.returncode == 0)
    doc = os.path.join(root, "docs", "architecture.md")
    text = open(doc).read() if os.path.exists(doc) else ""
    recipes = re.findall(r"^### Adding (.+)$", text, flags=re.M)
    sections = re.split(r"^### ", text, flags=re.M)[1:]
    followed = [s.split("\n", 1)[0] for s in sections if s.startswith("Adding") and re.search(r"Followed for|Example: ", s)]
    row(f"docs/architecture.md recipes followed once ({', '.join(followed) or 'none'} of {len(recipes)})",
        len(followed), len(recipes) if recipes else 4, "recipes", bool(recipes) and len(followed) == len(recipes))
    rows.write(out)


if __name__ == "__main__":
    main()
