#!/usr/bin/env python3
"""The reliability issue's acceptance rows from one run of scripts/reliability-check.sh.

usage: acceptance.py REPO_ROOT OUT_DIR
Writes OUT_DIR/acceptance.json (a list of {row, measured, target, unit, pass}) and
OUT_DIR/summary.md. Every number comes from files that run wrote; rows whose measurement
was not made in it are left out, never filled in.
"""
import json
import os
import re
import sys


def main():
    root, out = sys.argv[1], sys.argv[2]
    rows = []

    def row(name, measured, target, unit, passed):
        rows.append({"row": name, "measured": measured, "target": target, "unit": unit, "pass": bool(passed)})

    runs = [line.split("\t") for line in open(os.path.join(out, "suite_runs.tsv")) if line.strip()]
    failures = sum(int(r[1]) for r in runs)
    row(f"[gpu] suite {len(runs)} times in a row: failed binaries (4 test binaries + the fault suite each run)",
        failures, 0, "failures", len(runs) >= 5 and failures == 0)
    faults = [os.path.join(out, f"run{r[0]}", "faults.log") for r in runs]
    logs = [open(f).read() if os.path.exists(f) else "" for f in faults]
    fault_ok = bool(logs) and all("FAIL" not in log and "ok   the run exits 1" in log for log in logs)
    row("fault tests (oom mid-sweep, timeout, no NVML, trapping kernel) in every run", int(fault_ok), 1, "all passed", fault_ok)

    try:
        suite = json.load(open(os.path.join(out, "suite_power.json")))
        ratios = [(b["name"], b["power_w"] / b["power_limit_w"]) for b in suite["benchmarks"]
                  if b.get("power_w") and b.get("power_limit_w")]
        if ratios:
            name, worst = max(ratios, key=lambda r: r[1])
            row(f"suite with --gpucmp_power: highest average power / board limit ({name})", round(worst, 4), 1.05,
                "ratio", worst <= 1.05)
    except (OSError, ValueError, KeyError):
        pass
    table = os.path.join(out, "sanitize", "sanitizers.md")
    if os.path.exists(table):
        cells = [c.strip() for line in open(table) if line.startswith("| ") and not line.startswith("| binary")
                 for c in line.strip().strip("|").split("|")[1:]]
        errors = sum(int(c) for c in cells if c.isdigit())
        broken = [c for c in cells if not c.isdigit() and c != "not run"]
        missing = sum(1 for c in cells if c == "not run")
        row(f"compute-sanitizer memcheck, racecheck, synccheck, initcheck over every [gpu] binary and example "
            f"({len(cells) - missing} of {len(cells)} runs made, {len(broken)} crashed)",
            errors, 0, "errors", errors == 0 and not broken and missing == 0)
    fuzz = os.path.join(root, "results", "fuzz", "long_run.md")
    if os.path.exists(fuzz):
        lines = [l for l in open(fuzz) if l.startswith("| fuzz_")]
        execs = [int(l.split("|")[2]) for l in lines if l.split("|")[2].strip().isdigit()]
        crashes = sum(int(l.split("|")[4]) for l in lines)
        targets = 4  # json, safetensors, report_loader, flags
        row(f"fuzzing: fewest executions of the {targets} targets ({len(lines)} with a long run, results/fuzz/long_run.md)",
            min(execs) if len(execs) == targets else 0, 10_000_000, "executions",
            len(execs) == targets and min(execs) >= 10_000_000 and crashes == 0)
    json.dump(rows, open(os.path.join(out, "acceptance.json"), "w"), indent=1)
    with open(os.path.join(out, "summary.md"), "w") as md:
        md.write("| row | measured | target | unit | pass |\n|---|---|---|---|---|\n")
        for r in rows:
            md.write(f"| {r['row']} | {r['measured']} | {r['target']} | {r['unit']} | {'PASS' if r['pass'] else 'FAIL'} |\n")
    print(open(os.path.join(out, "summary.md")).read())


if __name__ == "__main__":
    main()
