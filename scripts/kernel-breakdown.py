#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: gpucmp contributors
"""Where a kernel-mode row's GPU time goes, by groups of kernels you name.

usage: kernel-breakdown.py KERNELS.json [--group NAME=REGEX ...] [--match REGEX]
                           [--out-json FILE] [--out-md FILE]

KERNELS.json is what a gpucmp benchmark writes with --gpucmp_kernels_out=FILE: for each
kernel-mode row, every kernel (memset, copy) it ran, with its launches per measured call
(per_launch) and median duration. A kernel belongs to the first --group whose REGEX its name
matches (searched, not anchored), else to a group of its own name. For each row (those whose
benchmark name matches --match): each group's launches and GPU time per call (per_launch x
median, summed over its kernels), its share of the row's busy time, and the busy time. The
row's span and idle time (the gaps between its kernels) are in the benchmark's own JSON
(counters span_us and idle_us).
"""
import argparse
import json
import re
import sys

from named_patterns import parse_named_patterns  # beside this script


def breakdown(entry, groups):
    totals = {}
    for k in entry.get("kernels", []):
        name = k.get("name", "")
        per_launch, median = k.get("per_launch"), k.get("median_s")
        if not isinstance(per_launch, (int, float)) or not isinstance(median, (int, float)):
            sys.exit(f"kernel-breakdown: {entry.get('benchmark')}: kernel '{name}' has no per_launch or median_s")
        group = next((g for g, pattern in groups if pattern.search(name)), name)
        t = totals.setdefault(group, {"group": group, "launches": 0.0, "us": 0.0})
        t["launches"] += per_launch
        t["us"] += per_launch * median * 1e6
    busy = sum(t["us"] for t in totals.values())
    rows = sorted(totals.values(), key=lambda t: -t["us"])
    for t in rows:
        t["launches"] = round(t["launches"], 3)
        t["share"] = round(t["us"] / busy, 4) if busy > 0 else None
        t["us"] = round(t["us"], 3)
    return {"benchmark": entry.get("benchmark", ""), "busy_us": round(busy, 3), "groups": rows}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kernels")
    ap.add_argument("--group", action="append", default=[])
    ap.add_argument("--match", default=".")
    ap.add_argument("--out-json")
    ap.add_argument("--out-md")
    a = ap.parse_args()
    groups = parse_named_patterns(a.group, "kernel-breakdown", "--group")
    try:
        match = re.compile(a.match)
    except re.error as e:
        sys.exit(f"kernel-breakdown: bad --match '{a.match}': {e}")
    try:
        with open(a.kernels) as f:
            doc = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        sys.exit(f"kernel-breakdown: cannot read {a.kernels}: {e}")
    if not isinstance(doc, dict) or not isinstance(doc.get("breakdowns"), list):
        sys.exit(f"kernel-breakdown: {a.kernels} has no 'breakdowns' list (write it with --gpucmp_kernels_out)")
    rows = [breakdown(e, groups) for e in doc["breakdowns"] if match.search(e.get("benchmark", ""))]
    if not rows:
        sys.exit(f"kernel-breakdown: no kernel-mode row of {a.kernels} matches '{a.match}'")
    lines = []
    for r in rows:
        lines += [f"### {r['benchmark']}", "", f"GPU busy {r['busy_us']:.1f} µs a call (kernels' own durations).", "",
                  "| kernels | launches a call | µs a call | share |", "|---|---:|---:|---:|"]
        for g in r["groups"]:
            share = f"{100 * g['share']:.1f} %" if g["share"] is not None else "–"
            lines.append(f"| {g['group']} | {g['launches']:g} | {g['us']:.1f} | {share} |")
        lines.append("")
    text = "\n".join(lines)
    if a.out_json:
        with open(a.out_json, "w") as f:
            json.dump({"source": a.kernels, "rows": rows}, f, indent=1)
    if a.out_md:
        with open(a.out_md, "w") as f:
            f.write(text)
    print(text)


if __name__ == "__main__":
    main()
