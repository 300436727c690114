#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: gpucmp contributors
"""The report's families, charts and P2P heat maps come from the rows' axes, not their names.

usage: random_names_families_check.py GPUCMP_REPORT OUT_DIR INPUT.json [INPUT.json ...]

Renames every benchmark of the inputs to a random string (the same one in every file, so the
rows still line up across GPUs), runs `gpucmp-report compare` on the originals and on the
renamed copies, and checks that the summaries (groups, their titles and geomean speedups), the
HTML page's charts of the described groups (titles, row labels, bars), its P2P heat maps and
the markdown's P2P tables are the same, and that there are some. Exits 1 on the first
difference. (Rows written without axes are charted under their names, after the marker
`<div id="undescribed-charts">`, which the comparison leaves out.)
"""
import json
import os
import random
import string
import subprocess
import sys


def random_name(rng):
    return "/".join("".join(rng.choice(string.ascii_letters) for _ in range(rng.randint(3, 10)))
                    for _ in range(rng.randint(1, 4)))


def renamed(doc, names):
    """`doc` with every benchmark name replaced through `names` (filled as new ones come)."""
    def new(name):
        base = name.split("/iterations:")[0]
        return names[base] + name[len(base):]
    for b in doc.get("benchmarks", []):
        for key in ("name", "run_name"):
            if key in b:
                b[key] = new(b[key])
    for row in doc["gpucmp"]["results"]:
        row["name"] = new(row["name"])
        row["benchmark"] = new(row["benchmark"])
    return doc


def sections(html, markdown):
    """What must not depend on names: the HTML's summary, its described groups' charts and its
    heat maps; the markdown's summary and P2P tables (up to the sources, which name the input
    files)."""
    def between(text, start, *ends):
        i = text.find(start)
        if i < 0:
            return ""
        stops = [j for j in (text.find(end, i + len(start)) for end in ends) if j >= 0]
        return text[i:min(stops)] if stops else text[i:]
    html_part = (between(html, '<section id="summary">', "</section>") +
                 between(html, '<section id="charts">', '<div id="undescribed-charts">', "<h2>P2P bandwidth</h2>", "</section>") +
                 between(html, "<h2>P2P bandwidth</h2>", "</section>"))
    md_part = between(markdown, "## Summary", "## Results") + between(markdown, "## P2P bandwidth", "## Sources")
    return html_part, md_part


def report(binary, files, out_dir, tag):
    html, md = os.path.join(out_dir, tag + ".html"), os.path.join(out_dir, tag + ".md")
    subprocess.run([binary, "compare", *files, "--html", html, "--markdown", md], check=True)
    return sections(open(html, encoding="utf-8").read(), open(md, encoding="utf-8").read())


def main():
    binary, out_dir, inputs = sys.argv[1], sys.argv[2], sys.argv[3:]
    os.makedirs(out_dir, exist_ok=True)
    rng = random.Random(20261204)
    names = {}
    docs = [json.load(open(path, encoding="utf-8")) for path in inputs]
    for doc in docs:
        for row in doc["gpucmp"]["results"]:
            names.setdefault(row["benchmark"], random_name(rng))
    renamed_files = []
    for path, doc in zip(inputs, docs):
        target = os.path.join(out_dir, "renamed_" + os.path.basename(path))
        with open(target, "w", encoding="utf-8") as f:
            json.dump(renamed(doc, names), f)
        renamed_files.append(target)
    original = report(binary, inputs, out_dir, "original")
    random_named = report(binary, renamed_files, out_dir, "random_names")
    failures = []
    if "<svg" not in original[0] or "over bytes" not in original[0]:
        failures.append("the originals drew no family over a swept axis (the check would prove nothing)")
    if "P2P bandwidth" not in original[0]:
        failures.append("the originals drew no P2P heat map (the check would prove nothing)")
    if original[0] != random_named[0]:
        failures.append("the HTML's summary, charts or heat maps differ under random names")
    if original[1] != random_named[1]:
        failures.append("the markdown's summary or P2P tables differ under random names")
    for old in names:
        if old in random_named[0]:
            failures.append(f"an original name '{old}' reached the charts of the renamed files")
            break
    for line in failures:
        print("random_names_families_check: " + line)
    print("random_names_families_check: " + ("FAILED" if failures else
          f"{len(names)} rows renamed; summaries, charts and heat maps are the same"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
