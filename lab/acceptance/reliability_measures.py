#!/usr/bin/env python3
"""The reliability checks' numbers from one run of scripts/reliability-check.sh (or of the
scripts it calls), for the row list lab/acceptance/reliability.json.

usage: reliability_measures.py REPO_ROOT OUT_DIR [INPUT_DIR...]
Writes OUT_DIR/measures.json: for each check whose inputs it finds (in OUT_DIR, then in each
INPUT_DIR), its numbers under the check's name; a check whose inputs are missing is left out,
never filled in. Inputs: readme_commands.tsv (scripts/reliability/readme-commands.sh, on a
machine like CI's), suite_runs.tsv and runN/ (the [gpu] suite runs: "suite" and "faults"),
gpu_check.txt (scripts/gpu-check.sh), suite_power.json ("power_suite"), power_counter.json
("power_window"), sanitize/sanitizers.md ("sanitizers").
"""
import json
import os
import re
import subprocess
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "python"))  # gpucmp_results, the one reader of gpucmp's files
import gpucmp_results  # noqa: E402  (python/gpucmp_results)


def sanitizer_counts(table):
    """Errors, runs that ended cleanly, runs that did not, runs not made and runs that ended in
    the tool's own error (the vendor table's, counted neither way), from the cells of
    sanitize.sh's table: "0 (22 runs)", "3", "time limit (60 s) x2", "not run x8", "0, exit 9",
    "tool error (1 counted)", a cell's runs joined with " + "; and the vendor table's findings
    (vendor.md beside it), when there is one."""
    cells = [c.strip() for line in open(table) if line.startswith("| ") and not line.startswith("| binary")
             for c in line.strip().strip("|").split("|")[1:]]
    errors = clean = unclean = not_run = tool_errors = 0
    for part in (p.strip() for c in cells for p in c.split(" + ")):
        m = re.fullmatch(r"(.*?)(?: x(\d+))?", part)
        what, times = m.group(1), int(m.group(2) or 1)
        counted = re.fullmatch(r"(\d+)(?: \((\d+) runs\))?", what)
        if counted:
            errors += int(counted.group(1))
            clean += int(counted.group(2) or 1)
        elif what == "not run":
            not_run += times
        elif what.startswith("tool error"):
            tool_errors += times
        else:
            unclean += times
    counts = {"errors": errors, "clean_runs": clean, "unclean_runs": unclean, "not_run": not_run, "tool_errors": tool_errors}
    vendor = os.path.join(os.path.dirname(table), "vendor.md")
    if os.path.exists(vendor):
        counts["vendor_findings"] = sum(1 for line in open(vendor) if line.startswith("| ") and not line.startswith("| tool "))
    return counts


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    root, out = sys.argv[1], sys.argv[2]
    inputs = [out] + sys.argv[3:]
    measures = {}

    def find(*names):
        for d in inputs:
            for n in names:
                if os.path.exists(os.path.join(d, n)):
                    return os.path.join(d, n)
        return None

    commands = find("readme_commands.tsv")
    if commands:
        text = open(commands).read()
        lines = [l.split("\t") for l in text.splitlines() if l.strip() and not l.startswith("#")]
        # The floor of the commit the file was made on (its header names it), else today's.
        floor_text = open(os.path.join(root, "tests", "ctest-floor.txt")).read()
        made_on = re.search(r"readme-commands\.sh, ([0-9a-f]{7,40}),", text)
        if made_on:
            shown = subprocess.run(["git", "-C", root, "show", f"{made_on.group(1)}:tests/ctest-floor.txt"],
                                   capture_output=True, text=True)
            if shown.returncode == 0:
                floor_text = shown.stdout
        floor = int(floor_text.split()[0])
        measures["readme"] = {"invocations": len(lines), "fewest_passing": min((int(l[1]) for l in lines), default=0),
                              "failed": sum(int(l[2]) - int(l[1]) for l in lines), "floor": floor}
        measures["readme"]["passing_over_floor"] = measures["readme"]["fewest_passing"] / floor

    suite_runs = find("suite_runs.tsv")
    if suite_runs:
        base = os.path.dirname(suite_runs)
        runs = [line.split("\t") for line in open(suite_runs) if line.strip()]
        measures["suite"] = {"runs": len(runs), "failed_binaries": sum(int(r[1]) for r in runs)}
        logs = [open(f).read() if os.path.exists(f) else ""
                for f in (os.path.join(base, f"run{r[0]}", "faults.log") for r in runs)]
        cupti = [open(f).read() if os.path.exists(f) else ""
                 for f in (os.path.join(base, f"run{r[0]}", "cupti_taken.log") for r in runs)]
        passed = bool(logs) and all("FAIL" not in log and "ok   the run exits 1" in log for log in logs) and \
            all("FAIL" not in log and "ok   the message names the other subscriber" in log for log in cupti)
        measures["faults"] = {"runs": len(runs), "all_passed": int(passed)}

    gpu_check = find("gpu_check.txt")
    if gpu_check:
        measures["gpu_check"] = {"passed": int("gpu-check: PASSED" in open(gpu_check).read())}

    suite_power = find("suite_power.json")
    if suite_power:
        suite = gpucmp_results.load(suite_power)
        ratios = [(r.benchmark, r.power_w / r.power_limit_w) for r in suite.rows if r.power_w and r.power_limit_w]
        if ratios:
            name, worst = max(ratios, key=lambda r: r[1])
            measures["power_suite"] = {"worst_ratio": round(worst, 4), "worst_row": name, "rows_with_power": len(ratios)}

    probe = find("power_counter.json")
    if probe:
        p = json.load(open(probe))
        measures["power_window"] = {"worst_ratio": round(p["window_0.2s_max_w"]["between_counter_steps"] / p["power_limit_w"], 4)}

    table = find(os.path.join("sanitize", "sanitizers.md"))
    if table:
        measures["sanitizers"] = sanitizer_counts(table)

    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "measures.json"), "w") as f:
        json.dump(measures, f, indent=1, sort_keys=True)
        f.write("\n")
    print(json.dumps(measures, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
