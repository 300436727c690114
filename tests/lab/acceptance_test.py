#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: gpucmp contributors
"""lab/acceptance/acceptance.py on a throwaway repository: every expression kind, pass and
fail, a stale row (its covered code changed after the run's commit), and refusals that name
the row and what is wrong.

usage: acceptance_test.py lab/acceptance/acceptance.py"""
import json
import os
import subprocess
import sys
import tempfile

tool = os.path.abspath(sys.argv[1])
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAILED:", what)


def git(repo, *args):
    return subprocess.run(["git", "-C", repo, *args], capture_output=True, text=True, check=True).stdout.strip()


def write(repo, name, text):
    path = os.path.join(repo, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text if isinstance(text, str) else json.dumps(text))


def run(repo, area):
    write(repo, "area.json", area)
    done = subprocess.run([sys.executable, tool, os.path.join(repo, "area.json"), "--root", repo],
                          capture_output=True, text=True)
    rows = None
    if done.returncode in (0, 1):
        with open(os.path.join(repo, area["out"], "acceptance.json")) as f:
            rows = json.load(f)
    return done, rows


with tempfile.TemporaryDirectory() as repo:
    git(repo, "init", "-q")
    git(repo, "config", "user.email", "t@example.com")
    git(repo, "config", "user.name", "t")
    write(repo, "include/a.hpp", "CUDNN_ATTR_X\n")
    write(repo, "include/b.hpp", "nothing\n")
    write(repo, "src/code.cpp", "int x;\n")
    write(repo, "results/new.json", {"rows": [{"key": "a/b", "ratio": 2.1}, {"key": "c", "ratio": 4.0}],
                                     "sections": {"batch 32, fp16": {"geomean": 1.02}}})
    write(repo, "results/old.json", {"rows": [{"key": "a/b", "ratio": 2.0}], "list": [[1, 2], [3, 5]]})
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "one")
    measured_at = git(repo, "rev-parse", "--short", "HEAD")
    write(repo, "results/run.json", {"commit": measured_at, "date": "2026-01-02"})
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "run")

    area = {"area": "test", "out": "out", "rows": [
        {"row": "grep", "measure": {"grep_files": "CUDNN_ATTR_", "paths": ["include"]}, "target": 1, "unit": "files"},
        {"row": "tracked", "measure": {"tracked": "^include/"}, "target": 2, "unit": "files", "pass_if": "=="},
        {"row": "apart", "measure": {"percent_apart": [{"json": "results/new.json", "path": "rows[key=a/b].ratio"},
                                                       {"json": "results/old.json", "path": "rows[key=a/b].ratio"}]},
         "target": 2, "unit": "%", "run": "results/run.json", "covers": ["src"]},
        {"row": "median", "measure": {"median": [{"number": 1}, {"number": 9},
                                                 {"json": "results/old.json", "path": "list[1][1]"}]},
         "target": 5, "unit": "x", "pass_if": "=="},
        {"row": "geomean", "measure": {"geomean": [{"number": 2}, {"number": 8}]}, "target": 4, "unit": "x", "pass_if": "=="},
        {"row": "section key with commas", "measure": {"ratio": [
            {"json": "results/new.json", "path": "sections.batch 32, fp16.geomean"}, {"number": 1}]},
         "target": 1.0, "unit": "x", "pass_if": ">"},
        {"row": "exit status", "measure": {"exit_status": ["python3", "-c", "import sys; sys.exit(3)"]},
         "target": 0, "unit": "status", "pass_if": "=="},
    ]}
    done, rows = run(repo, area)
    check(done.returncode == 1, f"a failing row makes the exit status 1 (got {done.returncode}: {done.stderr})")
    by = {r["row"]: r for r in rows or []}
    check(by["grep"]["measured"] == 1 and by["grep"]["pass"], "grep_files counts the one file that matches")
    check(by["tracked"]["measured"] == 2 and by["tracked"]["pass"], "tracked counts paths")
    check(abs(by["apart"]["measured"] - 5.0) < 1e-9 and by["apart"]["status"] == "fail", "5 % apart fails a 2 % target")
    check(by["apart"]["commit"] == measured_at and by["apart"]["date"] == "2026-01-02", "a run's commit and date are the row's")
    check(by["median"]["measured"] == 5 and by["median"]["pass"], "median of 1, 9 and a nested index")
    check(abs(by["geomean"]["measured"] - 4) < 1e-9, "geomean of 2 and 8")
    check(by["section key with commas"]["measured"] == 1.02, "a key with spaces and commas")
    check(by["exit status"]["measured"] == 3 and not by["exit status"]["pass"], "a check's exit status")
    check(all("commit" in r and "date" in r for r in rows or []), "every row has commit and date")
    summary = open(os.path.join(repo, "out", "summary.md")).read()
    check("| apart | 5.0 | <= 2 | % | FAIL |" in summary, "the summary's table row")

    # The covered code changes after the run's commit: the row is stale, not pass.
    area["rows"][2]["measure"] = {"number": 1}
    done, rows = run(repo, area)
    check({r["row"]: r for r in rows}["apart"]["status"] == "pass", "unchanged covered code: pass")
    write(repo, "src/code.cpp", "int y;\n")
    git(repo, "commit", "-qam", "change")
    done, rows = run(repo, area)
    apart = {r["row"]: r for r in rows}["apart"]
    check(apart["status"] == "stale" and not apart["pass"] and apart["changed_since"] == ["src/code.cpp"],
          f"changed covered code: stale, naming the file ({apart})")

    # A row whose run has not been made yet is "not measured"; the other rows are still written.
    area["rows"].append({"row": "later", "measure": {"json": "results/none/x.json", "path": "a"}, "target": 1,
                         "unit": "x", "run": "results/none/run.json"})
    done, rows = run(repo, area)
    later = {r["row"]: r for r in rows or []}.get("later", {})
    check(done.returncode == 1 and later.get("status") == "not measured" and later.get("measured") is None
          and len(rows) == len(area["rows"]), f"an unmade run: not measured, the rest written ({later})")
    check("results/none/run.json" in open(os.path.join(repo, "out", "summary.md")).read(), "the summary names the run to make")

    # A run that measured part of its area: a row whose key its files lack is "not measured",
    # naming the key; the same selector in a row without a run is refused (below).
    area["rows"].append({"row": "part", "measure": {"json": "results/new.json", "path": "rows[key=zz].ratio"},
                         "target": 1, "unit": "x", "run": "results/run.json"})
    done, rows = run(repo, area)
    part = {r["row"]: r for r in rows or []}.get("part", {})
    check(done.returncode == 1 and part.get("status") == "not measured" and part.get("missing") == "no element with key=zz"
          and len(rows) == len(area["rows"]), f"a key the run lacks: not measured, the rest written ({part}, {done.stderr})")
    check("(no element with key=zz)" in open(os.path.join(repo, "out", "summary.md")).read(), "the summary names the key")

    # Refusals name the row and what is wrong.
    for bad, expect in [({"json": "results/new.json", "path": "rows[key=zz].ratio"}, "0 elements with key=zz"),
                        ({"json": "results/new.json", "path": "nope"}, "no key 'nope'"),
                        ({"json": "results/missing.json", "path": "x"}, "cannot read results/missing.json"),
                        ({"json": "results/new.json", "path": "rows"}, "not a number"),
                        ({"what": 1}, "unknown expression"),
                        ({"ratio": [{"number": 1}, {"number": 0}]}, "ratio over zero")]:
        done, _ = run(repo, {"area": "t", "out": "out2", "rows": [{"row": "bad one", "measure": bad, "target": 0, "unit": "x"}]})
        check(done.returncode == 2 and "bad one" in done.stderr and expect in done.stderr,
              f"refused naming the row and '{expect}' (got {done.returncode}: {done.stderr.strip()})")
    done, _ = run(repo, {"area": "t", "out": "out2", "rows": [{"row": "no target", "measure": {"number": 1}, "unit": "x"}]})
    check(done.returncode == 2 and "no 'target'" in done.stderr, "a row without a target is refused")

print("acceptance_test:", "FAILED" if failures else "passed")
sys.exit(1 if failures else 0)
