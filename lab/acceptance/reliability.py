#!/usr/bin/env python3
"""The reliability issue's acceptance rows from one run of scripts/reliability-check.sh.

usage: acceptance.py REPO_ROOT OUT_DIR [INPUT_DIR...] [--carry EARLIER_ACCEPTANCE_JSON]
Writes OUT_DIR/acceptance.json (a list of {row, measured, target, unit, pass}) and
OUT_DIR/summary.md. Every number comes from files scripts wrote: each input is looked up in
OUT_DIR, then in each INPUT_DIR (the outputs of other device calls, since one call cannot
hold every part). Rows whose measurement was not made are left out, never filled in; with
--carry they are taken unchanged from an earlier acceptance.json (rows this script wrote
then), and summary.md names them, so that one part can be measured again without the inputs
of the others.
Inputs: suite_runs.tsv and runN/ (the [gpu] suite runs), suite_power.json (or gpu-check's
suite.json), power_counter.json, sanitize/sanitizers.md, gpu_check.txt (gpu-check.sh's
output), readme_commands.tsv (scripts/reliability/readme-commands.sh, on a machine like
CI's), and REPO_ROOT/results/fuzz/long_run.md.
"""
import json
import os
import re
import subprocess
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)  # acceptance_rows
sys.path.insert(0, os.path.join(here, "..", "..", "python"))  # gpucmp_results, the one reader of gpucmp's files
from acceptance_rows import Rows  # noqa: E402  (lab/acceptance/acceptance_rows.py)
import gpucmp_results  # noqa: E402  (python/gpucmp_results)


# Every row's kind, in the order rows are written, and how its text always begins: how a row of
# an earlier acceptance.json is recognised when it is carried.
KINDS = {"readme": "README commands", "suite": "[gpu] suite", "faults": "fault tests",
         "gpu_check": "scripts/gpu-check.sh", "power_suite": "suite with --gpucmp_power",
         "power_window": "0.2 s power windows", "sanitizers": "compute-sanitizer", "fuzz": "fuzzing"}


def main():
    args = sys.argv[1:]
    carry = None
    if "--carry" in args:
        at = args.index("--carry")
        if at + 1 >= len(args):
            sys.exit("acceptance: --carry needs an earlier acceptance.json")
        carry = args[at + 1]
        del args[at:at + 2]
    if len(args) < 2:
        sys.exit(__doc__)
    root, out = args[0], args[1]
    inputs = [out] + args[2:]
    measured = {}

    def row(kind, name, value, target, unit, passed):
        prefix = KINDS[kind]
        assert name.startswith(prefix), f"a {kind} row begins with {prefix!r}: {name}"
        measured[kind] = (name, value, target, unit, passed)

    def find(*names):
        """The first of names in OUT_DIR, then in each INPUT_DIR; None where none exists."""
        for d in inputs:
            for n in names:
                if os.path.exists(os.path.join(d, n)):
                    return os.path.join(d, n)
        return None

    commands = find("readme_commands.tsv")
    if commands:
        # order, passed, total per invocation of scripts/run-tests.sh
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
        fewest = min((int(l[1]) for l in lines), default=0)
        failed = sum(int(l[2]) - int(l[1]) for l in lines)
        orders = ", ".join(l[0] for l in lines)
        at = f" at {made_on.group(1)}" if made_on else ""
        row("readme", f"README commands on a fresh clone{at} on a machine like CI's ({orders}): fewest tests passing, none failing",
            fewest, floor, "tests", bool(lines) and fewest >= floor and failed == 0)

    suite_runs = find("suite_runs.tsv")
    if suite_runs:
        base = os.path.dirname(suite_runs)
        runs = [line.split("\t") for line in open(suite_runs) if line.strip()]
        failures = sum(int(r[1]) for r in runs)
        row("suite", f"[gpu] suite {len(runs)} times in a row in one call: failed binaries "
            "(4 test binaries, the fault suite and the CUPTI-taken check each run)",
            failures, 0, "failures", len(runs) >= 5 and failures == 0)
        logs = [open(f).read() if os.path.exists(f) else ""
                for f in (os.path.join(base, f"run{r[0]}", "faults.log") for r in runs)]
        cupti = [open(f).read() if os.path.exists(f) else ""
                 for f in (os.path.join(base, f"run{r[0]}", "cupti_taken.log") for r in runs)]
        fault_ok = bool(logs) and all("FAIL" not in log and "ok   the run exits 1" in log for log in logs) and \
            all("FAIL" not in log and "ok   the message names the other subscriber" in log for log in cupti)
        row("faults", "fault tests (oom mid-sweep, timeout, no NVML, trapping kernel, CUPTI taken) in every run", int(fault_ok), 1,
            "all passed", fault_ok)

    gpu_check = find("gpu_check.txt")
    if gpu_check:
        text = open(gpu_check).read()
        passed = "gpu-check: PASSED" in text
        row("gpu_check", "scripts/gpu-check.sh on the H200", int(passed), 1, "passed", passed)

    try:
        suite = gpucmp_results.load(find("suite_power.json", "suite.json") or os.path.join(out, "suite_power.json"))
        ratios = [(r.name, r.power_w / r.power_limit_w) for r in suite.rows if r.power_w and r.power_limit_w]
        if ratios:
            name, worst = max(ratios, key=lambda r: r[1])
            row("power_suite", f"suite with --gpucmp_power: highest average power / board limit ({name})", round(worst, 4), 1.05,
                "ratio", worst <= 1.05)
    except gpucmp_results.ResultFileError as e:
        print(f"acceptance: the suite's power row is left out: {e}", file=sys.stderr)
    except OSError:
        pass
    probe = find("power_counter.json")
    if probe:
        p = json.load(open(probe))
        worst = p["window_0.2s_max_w"]["between_counter_steps"] / p["power_limit_w"]
        row("power_window", "0.2 s power windows under a sustained GEMM, between the counter's steps: highest average / limit",
            round(worst, 4), 1.05, "ratio", worst <= 1.05)
    table = find(os.path.join("sanitize", "sanitizers.md"))
    if table:
        cells = [c.strip() for line in open(table) if line.startswith("| ") and not line.startswith("| binary")
                 for c in line.strip().strip("|").split("|")[1:]]
        # A cell joins its runs' results with " + ": "0 (22 runs)", "3", "time limit (60 s) x2",
        # "not run x8", "0, exit 9", "tool error (1 counted)".
        errors = runs = missing = unclean = 0
        for part in (p.strip() for c in cells for p in c.split(" + ")):
            m = re.fullmatch(r"(.*?)(?: x(\d+))?", part)
            what, times = m.group(1), int(m.group(2) or 1)
            clean = re.fullmatch(r"(\d+)(?: \((\d+) runs\))?", what)
            if clean:
                errors += int(clean.group(1))
                runs += int(clean.group(2) or 1)
            elif what == "not run":
                missing += times
            else:
                unclean += times
        row("sanitizers", f"compute-sanitizer memcheck, racecheck, synccheck, initcheck over every [gpu] binary and example "
            f"({runs} runs ended cleanly, {unclean} did not, {missing} not run)",
            errors, 0, "errors", errors == 0 and unclean == 0 and missing == 0)
    fuzz = os.path.join(root, "results", "fuzz", "long_run.md")
    if os.path.exists(fuzz):
        lines = [l for l in open(fuzz) if l.startswith("| fuzz_")]
        execs = [int(l.split("|")[2]) for l in lines if l.split("|")[2].strip().isdigit()]
        crashes = sum(int(l.split("|")[4]) for l in lines)
        targets = 4  # json, safetensors, report_loader, flags
        row("fuzz", f"fuzzing: fewest executions of the {targets} targets ({len(lines)} with a long run, results/fuzz/long_run.md)",
            min(execs) if len(execs) == targets else 0, 10_000_000, "executions",
            len(execs) == targets and min(execs) >= 10_000_000 and crashes == 0)
    earlier = []
    if carry:
        try:
            earlier = json.load(open(carry))
        except (OSError, ValueError) as e:
            sys.exit(f"acceptance: --carry {carry}: {e}")
        if not isinstance(earlier, list) or not all(isinstance(r, dict) and isinstance(r.get("row"), str)
                                                    for r in earlier):
            sys.exit(f"acceptance: --carry {carry}: not a list of acceptance rows")
    rows, carried = Rows(), []
    for kind, prefix in KINDS.items():
        if kind in measured:
            rows.add(*measured[kind])
            continue
        for r in earlier:
            if r["row"].startswith(prefix):
                rows.add(r["row"], r["measured"], r["target"], r["unit"], r["pass"])
                carried.append(prefix)
                break
    note = ""
    if carried:
        note = (f"Rows carried unchanged from an earlier `acceptance.json` (`--carry {carry}`), not measured "
                f"again in this one: {', '.join(carried)}.")
    rows.write(out, note)


if __name__ == "__main__":
    main()
