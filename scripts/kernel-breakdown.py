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
(counters span_us and idle_us). Kernels that overlap (launched early, as programmatic dependent
launch does, a kernel counts its wait for the one before it in its duration) make the busy time
exceed the step and inflate the waiting kernels' share; where the file has each kernel's
exposed time (exposed_s: what it ran past the kernels before it, overlaps counted once), each
group's exposed µs a call and its share of the covered time are given too.
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
        t = totals.setdefault(group, {"group": group, "launches": 0.0, "us": 0.0, "exposed_us": 0.0})
        t["launches"] += per_launch
        t["us"] += per_launch * median * 1e6
        exposed, count = k.get("exposed_s"), k.get("count")
        if isinstance(exposed, (int, float)) and isinstance(count, (int, float)) and count > 0 and t["exposed_us"] is not None:
            t["exposed_us"] += exposed * per_launch / count * 1e6  # summed over count activities: a call's share
        else:
            t["exposed_us"] = None  # an older file, or a kernel without it
    busy = sum(t["us"] for t in totals.values())
    exposed_known = all(t["exposed_us"] is not None for t in totals.values())
    covered = sum(t["exposed_us"] for t in totals.values()) if exposed_known else None
    rows = sorted(totals.values(), key=lambda t: -t["us"])
    for t in rows:
        t["launches"] = round(t["launches"], 3)
        t["share"] = round(t["us"] / busy, 4) if busy > 0 else None
        t["us"] = round(t["us"], 3)
        if exposed_known:
            t["exposed_share"] = round(t["exposed_us"] / covered, 4) if covered > 0 else None
            t["exposed_us"] = round(t["exposed_us"], 3)
        else:
            t["exposed_us"] = t["exposed_share"] = None
    return {"benchmark": entry.get("benchmark", ""), "busy_us": round(busy, 3),
            "covered_us": round(covered, 3) if covered is not None else None, "groups": rows}


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
    percent = lambda v: f"{100 * v:.1f} %" if v is not None else "–"  # noqa: E731
    for r in rows:
        covered = f"; covered {r['covered_us']:.1f} µs, overlaps counted once" if r["covered_us"] is not None else ""
        lines += [f"### {r['benchmark']}", "", f"GPU busy {r['busy_us']:.1f} µs a call (kernels' own durations){covered}.", "",
                  "| kernels | launches a call | µs a call | share | exposed µs a call | exposed share |",
                  "|---|---:|---:|---:|---:|---:|"]
        for g in r["groups"]:
            exposed = f"{g['exposed_us']:.1f}" if g["exposed_us"] is not None else "–"
            lines.append(f"| {g['group']} | {g['launches']:g} | {g['us']:.1f} | {percent(g['share'])} | {exposed} | "
                         f"{percent(g['exposed_share'])} |")
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
