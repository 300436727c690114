#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: gpucmp contributors
"""gpucmp-report's before/after comparison, end to end on result files.

usage: before_after_check.py GPUCMP_REPORT SUITE_JSON OUT_DIR

From a suite file's rows it writes runs with per-sample times drawn as a GPU's are (log-normal
noise, a drift between runs, a rare slow sample) and checks what `compare --label` says: two
runs of one binary are SAME on every row and exit 0; one row 5 % slower is SLOWER and exits 3
(the CI gate); a faster row is FASTER; a row that failed in the second run is NOT MEASURED and
exits 3; a file without per-sample times is not compared; and misuse is refused with exit 2.
"""
import copy
import csv
import json
import math
import os
import random
import subprocess
import sys


def with_samples(suite, rng, slow=None, speed=1.0, failed=None, drop_samples=False):
    doc = copy.deepcopy(suite)
    drift = 1 + rng.uniform(-0.005, 0.005)
    for row in doc["gpucmp"]["results"]:
        if row["status"] != "ok":
            continue
        if row["benchmark"] == failed:
            row.update(status="failed", message="copy verification: destination differs from source")
            for key in ("seconds", "sample_seconds"):
                row.pop(key, None)
            continue
        factor = drift * (speed if row["benchmark"] == slow else 1.0)
        samples = [row["seconds"] * factor * math.exp(rng.gauss(0, 0.004)) * (1.5 if rng.random() < 0.02 else 1)
                   for _ in range(rng.randint(30, 200))]
        if not drop_samples:
            row["sample_seconds"] = samples
        row["seconds"] = sorted(samples)[len(samples) // 2]
    return doc


def main():
    report, suite_path, out = sys.argv[1:4]
    os.makedirs(out, exist_ok=True)
    suite = json.load(open(suite_path, encoding="utf-8"))
    names = [r["benchmark"] for r in suite["gpucmp"]["results"] if r["status"] == "ok"]
    rng = random.Random(45)
    failures = []

    def write(name, doc):
        path = os.path.join(out, name + ".json")
        json.dump(doc, open(path, "w", encoding="utf-8"))
        return path

    def compare(label, a, b, *extra):
        csv_path = os.path.join(out, label + ".csv")
        run = subprocess.run([report, "compare", "--label", "before=" + a, "--label", "after=" + b, "--csv", csv_path,
                              *extra], capture_output=True, text=True)
        rows = {r["benchmark"]: r for r in csv.DictReader(open(csv_path, encoding="utf-8"))} if run.returncode in (0, 3) else {}
        return run, rows

    def expect(what, condition):
        if not condition:
            failures.append(what)

    base = write("before", with_samples(suite, rng))
    run, rows = compare("a_a", base, write("again", with_samples(suite, rng)))
    expect(f"A/A: exit {run.returncode}, not 0: {run.stderr}", run.returncode == 0)
    expect(f"A/A: verdicts {sorted({r['verdict'] for r in rows.values()})}, not all SAME",
           len(rows) == len(names) and all(r["verdict"] == "SAME" for r in rows.values()))

    slow, fast, broken = names[0], names[1], names[2]
    run, rows = compare("slowed", base, write("slowed", with_samples(suite, rng, slow=slow, speed=1.05)))
    expect(f"slowed: exit {run.returncode}, not 3", run.returncode == 3)
    expect(f"slowed: {slow} is {rows.get(slow, {}).get('verdict')}, not SLOWER", rows.get(slow, {}).get("verdict") == "SLOWER")
    ratio = float(rows.get(slow, {}).get("ratio") or 0)
    expect(f"slowed: ratio {ratio}, not about 1.05", abs(ratio - 1.05) < 0.01)
    expect("slowed: another row is not SAME", all(r["verdict"] == "SAME" for n, r in rows.items() if n != slow))
    expect("slowed: the summary on stderr does not say 1 SLOWER", "1 SLOWER" in run.stderr)

    run, rows = compare("faster", base, write("faster", with_samples(suite, rng, slow=fast, speed=0.9)))
    expect(f"faster: exit {run.returncode}, not 0", run.returncode == 0)
    expect(f"faster: {fast} is {rows.get(fast, {}).get('verdict')}", rows.get(fast, {}).get("verdict") == "FASTER")

    run, rows = compare("failed", base, write("failed", with_samples(suite, rng, failed=broken)))
    expect(f"failed: exit {run.returncode}, not 3", run.returncode == 3)
    expect(f"failed: {broken} is {rows.get(broken, {}).get('verdict')}", rows.get(broken, {}).get("verdict") == "NOT MEASURED")
    expect("failed: the note does not carry the message", "destination differs" in rows.get(broken, {}).get("note", ""))

    run, rows = compare("old_file", base, write("old", with_samples(suite, rng, drop_samples=True)))
    expect(f"old file: exit {run.returncode}, not 0", run.returncode == 0)
    expect("old file: rows without samples are compared",
           rows and all(r["verdict"] == "not compared" and "per-sample" in r["note"] for r in rows.values()))

    md = subprocess.run([report, "compare", "--label", "main=" + base, "--label", "branch=" + base],
                        capture_output=True, text=True)
    expect("markdown: no summary line first", "**NO REGRESSION:**" in md.stdout and "| benchmark | main | branch |" in md.stdout)

    misuse = [
        (["compare", "--label", "before=" + base], 2, "takes two --label"),
        (["compare", "--label", "before=" + base, "--label", "after=" + base, "--project", "l40s"], 2, "compare GPUs"),
        (["compare", "--label", "x=" + base, "--label", "x=" + base], 1, "both runs are labelled 'x'"),
        (["compare", base, "--min-change", "0.05"], 2, "--min-change belongs"),
        (["compare", "--label", "a=" + base, "--label", "b=" + base, "--min-change", "5%"], 2, "is not a fraction"),
        (["compare", "--label", "a=" + base, "--label", "b=" + base, "--min-change-s", "-1"], 2, "is not a time in seconds"),
        (["compare", "--label", "a=" + base, "--label", "b=" + base, "--html", os.path.join(out, "x.html")], 2, "not --html"),
        (["compare", "--label", base], 2, "is not NAME=RESULT.json"),
    ]
    for args, code, says in misuse:
        run = subprocess.run([report, *args], capture_output=True, text=True)
        expect(f"{' '.join(args[1:3])}...: exit {run.returncode} (want {code}), stderr {run.stderr[:200]!r}",
               run.returncode == code and says in run.stderr)

    for line in failures:
        print("before_after_check: " + line)
    print("before_after_check: " + ("FAILED" if failures else f"A/A SAME on {len(names)} rows; SLOWER, FASTER, "
                                    "NOT MEASURED, not compared and misuse each as expected"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
