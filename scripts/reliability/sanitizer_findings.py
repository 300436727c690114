#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: gpucmp contributors
"""Sorts one compute-sanitizer log's findings by whose they are (scripts/sanitize.sh, per run).

usage: sanitizer_findings.py LOG REPORTED
       sanitizer_findings.py --table OUT_MD CELLS_DIR VENDOR_TSV...
REPORTED is the tool's own error count (its ERROR or RACECHECK summary). Prints the count
against gpucmp on the first line, then one line per finding inside a kernel of a library
gpucmp calls: the kernel and the finding's first line, tab-separated. Only racecheck and
synccheck findings are sorted so (sanitize.sh calls this for those two): how a vendor's
threads share memory is the vendor's design, while memcheck and initcheck findings in any
kernel count against gpucmp, whose buffers the vendor kernels read and write.

--table writes the vendor findings and the tool's own errors of several calls as one markdown
table: the lines of the VENDOR_TSV files (sanitize.sh's vendor.tsv: tool, program, part, kind,
kernel, finding, libraries, command) whose cell in CELLS_DIR was made (a later call's cell of
the same case replaces the finding of an earlier one).

A finding is a vendor's only when its report names the kernel and that kernel is not
gpucmp's: gpucmp's kernels live in namespace gpucmp (the tests' in gpucmp_test) and the
examples' own kernel is saxpy. Every finding the log does not name a kernel for (a leak, a
host API error, a report cut by --print-limit) stays gpucmp's: nothing unknown is excused.
"""
import os
import re
import sys

OWN = re.compile(r"gpucmp|saxpy")
PREFIX = re.compile(r"^=========\s?")
# The first line of one finding (memcheck, initcheck, synccheck; racecheck's hazards).
HEADER = re.compile(r"^(Invalid |Uninitialized |Barrier error|Program hit |Race reported|Error: Race reported|"
                    r"Leaked |Malloc/Free error|Cuda API error|Detected |Warning: Race reported|Error: )")
# Where the device code was: "at 0x50 in kernel(args)" (CUDA 11) or "at kernel(args)+0x50 in file:line"
# (CUDA 12 and later); racecheck's "... access at kernel(args)+0x1a0 in file:line".
AT_OFFSET_IN = re.compile(r"\bat 0x[0-9a-f]+ in (.+?)\s*$")
AT_NAME_OFFSET = re.compile(r"\bat (.+?)\+0x[0-9a-f]+(?: in .*)?$")
SUMMARY = re.compile(r"^(ERROR SUMMARY|RACECHECK SUMMARY|LEAK SUMMARY)")


def kernel_of(lines):
    """The device function a finding's lines name, or None (host frames are not looked at)."""
    for line in lines:
        if "Host Frame" in line or "host backtrace" in line:
            return None
        for pattern in (AT_OFFSET_IN, AT_NAME_OFFSET):
            m = pattern.search(line)
            if m:
                return m.group(1).strip()
    return None


def findings(text):
    """Each counted finding's first line and the kernel it names (or None), in order."""
    records, current = [], None
    for raw in text.splitlines():
        if not raw.startswith("========="):
            continue
        line = PREFIX.sub("", raw).strip()
        if HEADER.match(line):
            current = {"what": line, "lines": []}
            records.append(current)
        elif SUMMARY.match(line):
            current = None
        elif current is not None:
            current["lines"].append(line)
    # racecheck names the kernel on the finding's own line; its warnings are not in its error count.
    return [{"what": r["what"], "kernel": kernel_of([r["what"]] + r["lines"])} for r in records
            if not r["what"].startswith("Warning")]


def classify(text, reported):
    """{"own": the count against gpucmp, "vendor": [{"kernel", "what"}, ...]}."""
    vendor = [{"kernel": f["kernel"], "what": f["what"]} for f in findings(text)
              if f["kernel"] is not None and not OWN.search(f["kernel"])]
    vendor = vendor[:reported]  # never more excused than the tool counted
    return {"own": max(reported - len(vendor), 0), "vendor": vendor}


VENDOR_COLUMNS = ["tool", "program", "part", "kind", "kernel", "finding", "libraries", "command"]


def vendor_table(out_md, cells_dir, sources):
    """The vendor/tool table (markdown) of the findings whose cells the joined table kept."""
    kept = {}
    for source in sources:
        if not os.path.exists(source):
            continue
        for line in open(source, errors="replace"):
            fields = line.rstrip("\n").split("\t")
            if len(fields) != len(VENDOR_COLUMNS):
                sys.exit(f"sanitizer_findings: {source}: not a vendor.tsv line: {line.strip()}")
            row = dict(zip(VENDOR_COLUMNS, fields))
            key = (row["tool"], row["program"], row["part"])
            if key not in kept or kept[key]["source"] != source:
                kept[key] = {"source": source, "rows": []}  # a later call's run of the case replaces it
            kept[key]["rows"].append(row)
    lines = ["| tool | program | case | kind | kernel | finding | libraries | to reproduce |", "|---|---|---|---|---|---|---|---|"]
    for (tool, program, part), entry in sorted(kept.items()):
        cell = os.path.join(cells_dir, f"{tool}.{program}.{part}")
        if not os.path.exists(cell) or open(cell).read().strip() == "not run":
            continue
        for r in entry["rows"]:
            esc = lambda v: v.replace("|", "\\|")
            lines.append(f"| {tool} | {program} | {part} | {r['kind']} | `{esc(r['kernel'])}` | {esc(r['finding'])} | "
                         f"{esc(r['libraries'])} | `{esc(r['command'])}` |")
    with open(out_md, "w") as f:
        f.write("\n".join(lines) + "\n")
    return len(lines) - 2


def main():
    if len(sys.argv) >= 4 and sys.argv[1] == "--table":
        print(f"sanitizer_findings: {vendor_table(sys.argv[2], sys.argv[3], sys.argv[4:])} vendor or tool findings")
        return
    if len(sys.argv) != 3 or not sys.argv[2].isdigit():
        sys.exit(__doc__)
    with open(sys.argv[1], errors="replace") as f:
        text = f.read()
    sorted_findings = classify(text, int(sys.argv[2]))
    print(sorted_findings["own"])
    for v in sorted_findings["vendor"]:
        print(f"{v['kernel']}\t{v['what']}".replace("\n", " "))


if __name__ == "__main__":
    main()
