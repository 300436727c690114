#!/usr/bin/env python3
"""Margins of the GPU tests' timing bounds over repeated runs of the [gpu] suite.

usage: timing_margins.py REPO_ROOT RUN_DIR... > timing_margins.md
Each RUN_DIR holds Catch2 XML reports written with -s (every assertion with its values).
An assertion is a timing bound when its source line uses GPUCMP_CHECK_TIMING or its test
case is tagged [timing]. For each one with a comparison of two numbers, the smallest margin
seen over the runs: (bound - value) / |bound| for <= and <, the mirror for >= and >, and
for Approx the distance from the approximated value against the tolerance.
"""
import glob
import os
import re
import sys
import xml.etree.ElementTree as ET

NUMBER = r"(-?[0-9.]+(?:e[-+]?[0-9]+)?)"


def margin(expanded):
    e = expanded.strip().replace("\n", " ")
    m = re.fullmatch(NUMBER + r"\s*(<=|<|>=|>)\s*" + NUMBER, e)
    if m:
        a, op, b = float(m.group(1)), m.group(2), float(m.group(3))
        if b == 0:
            return None
        return (b - a) / abs(b) if op in ("<=", "<") else (a - b) / abs(b)
    m = re.fullmatch(NUMBER + r"\s*==\s*Approx\(\s*" + NUMBER + r"\s*\)", e)
    if m:
        a, b = float(m.group(1)), float(m.group(2))
        return -abs(a - b) / abs(b) if b else None
    return None


def main():
    root, runs = sys.argv[1], sys.argv[2:]
    sources = {}

    def source_line(path, line):
        if path not in sources:
            full = path if os.path.isabs(path) else os.path.join(root, path)
            if not os.path.exists(full):
                hits = glob.glob(os.path.join(root, "tests", "**", os.path.basename(path)), recursive=True)
                full = hits[0] if hits else None
            sources[path] = open(full).read().splitlines() if full else []
        lines = sources[path]
        return lines[line - 1] if 0 < line <= len(lines) else ""

    seen = {}  # (file, line) -> [case, original, margins]
    for run in runs:
        for report in sorted(glob.glob(os.path.join(run, "*.xml"))):
            try:
                tree = ET.parse(report)
            except ET.ParseError:
                continue
            for case in tree.iter("TestCase"):
                timing_case = "[timing]" in case.get("tags", "")
                for expr in case.iter("Expression"):
                    path, line = expr.get("filename", ""), int(expr.get("line", "0"))
                    text = source_line(path, line)
                    if not (timing_case or "GPUCMP_CHECK_TIMING" in text):
                        continue
                    value = margin(expr.findtext("Expanded", ""))
                    if value is None:
                        continue
                    key = (os.path.basename(path), line)
                    entry = seen.setdefault(key, [case.get("name"), expr.findtext("Original", "").strip(), []])
                    entry[2].append(value)
    print(f"Timing bounds of the [gpu] suite over {len(runs)} runs: the smallest margin seen (fraction of the bound;")
    print("negative for Approx: the largest relative distance, against the tolerance in the expression).\n")
    print("| test | assertion | runs | smallest margin | largest margin |")
    print("|---|---|---|---|---|")
    for (path, line), (case, original, values) in sorted(seen.items()):
        print(f"| {path}:{line} {case} | `{original}` | {len(values)} | {min(values):.4f} | {max(values):.4f} |")


if __name__ == "__main__":
    main()
