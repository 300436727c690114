#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: gpucmp contributors
"""Acceptance rows from a declarative list: one generic tool, one small JSON file per area.

usage: acceptance.py AREA.json [--root REPO_ROOT] [--out DIR]

AREA.json: {"area": NAME, "out": "results/<gpu>/<area>", "rows": [ROW, ...]}. A row:
  "row"      what it measures, in words
  "measure"  an expression (below) giving the measured number
  "target"   the number it is held to; "pass_if": "<=", "<", ">=", ">" or "==" (default "<=")
  "unit"     the measured number's unit
  "run"      (optional) a run.json beside the measured files, {"commit", "date"}: the tree and
             day they were measured at; without one the row measures the tree itself (HEAD, today).
             A run.json that does not exist yet makes the row "not measured" (the run is to be made),
             and so does a [field=value] its run's files lack (a run that covered part of its area:
             the summary names what is missing); a row without a run is refused instead
  "covers"   (optional) paths of the code the row covers: a row whose run's commit is older than
             the last change to one of them is "stale", never "pass"
Expressions, nested freely:
  {"json": FILE, "path": "rows[key=resnet50/fp16/bs32/graph].ratio"}   a number in a JSON file;
      a path is dotted keys, [N] indexes and [field=value] selects the element of a list
  {"grep_files": REGEX, "paths": [DIR, ...]}   tracked files under the paths whose text matches
  {"tracked": REGEX}                            tracked files whose path matches
  {"exit_status": [PROGRAM, ARG, ...]}          a check's exit status, run in the repository
                                                ("python3" is this interpreter)
  {"ratio": [A, B]}, {"percent_apart": [A, B]} (100 |A / B - 1|), {"median": [...]},
  {"geomean": [...]}, {"number": N}
Writes OUT/acceptance.json (a list of {row, measured, target, unit, pass, status, commit,
date}) and OUT/summary.md, and exits 1 when a row fails or is stale.
"""
import datetime
import json
import math
import os
import re
import statistics
import subprocess
import sys

COMPARISONS = {"<=": lambda a, b: a <= b, "<": lambda a, b: a < b, ">=": lambda a, b: a >= b,
               ">": lambda a, b: a > b, "==": lambda a, b: a == b}


class AcceptanceError(Exception):
    """A row that cannot be measured as written: names the row and what is wrong."""


class NotInRun(AcceptanceError):
    """A [field=value] that selects nothing: for a row with a run, what that run did not measure."""

    def __init__(self, message, missing):
        super().__init__(message)
        self.missing = missing


def git(root, *args):
    return subprocess.run(["git", "-C", root, *args], capture_output=True, text=True, check=True).stdout


def select(value, path, where):
    """The element of `value` at `path` (dotted keys, [N], [field=value])."""
    for part in re.findall(r"[^.\[\]]+|\[[^\]]*\]", path):
        if part.startswith("["):
            inner = part[1:-1]
            if "=" in inner:
                field, wanted = inner.split("=", 1)
                found = [e for e in value if isinstance(e, dict) and str(e.get(field)) == wanted]
                message = f"{where}: {len(found)} elements with {field}={wanted}, not one"
                if not found:
                    raise NotInRun(message, f"no element with {field}={wanted}")
                if len(found) > 1:
                    raise AcceptanceError(message)
                value = found[0]
            else:
                value = value[int(inner)]
        else:
            if not isinstance(value, dict) or part not in value:
                raise AcceptanceError(f"{where}: no key '{part}'")
            value = value[part]
    return value


def evaluate(expr, root, where):
    if not isinstance(expr, dict) or len(expr) == 0:
        raise AcceptanceError(f"{where}: an expression is an object, got {expr!r}")
    if "json" in expr:
        path = os.path.join(root, expr["json"])
        try:
            with open(path) as f:
                doc = json.load(f)
        except (OSError, json.JSONDecodeError) as e:
            raise AcceptanceError(f"{where}: cannot read {expr['json']}: {e}") from e
        value = select(doc, expr.get("path", ""), f"{where}, {expr['json']}")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise AcceptanceError(f"{where}: {expr['json']} {expr.get('path')} is {value!r}, not a number")
        return float(value)
    if "grep_files" in expr:
        pattern = re.compile(expr["grep_files"])
        hits = 0
        for name in git(root, "ls-files", "--", *expr.get("paths", ["."])).splitlines():
            try:
                with open(os.path.join(root, name), encoding="utf-8", errors="replace") as f:
                    hits += bool(pattern.search(f.read()))
            except OSError:
                continue
        return float(hits)
    if "tracked" in expr:
        pattern = re.compile(expr["tracked"])
        return float(sum(1 for name in git(root, "ls-files").splitlines() if pattern.search(name)))
    if "number" in expr:
        return float(expr["number"])
    if "exit_status" in expr:
        command = [sys.executable if a == "python3" else a for a in expr["exit_status"]]
        try:
            return float(subprocess.run(command, cwd=root, capture_output=True).returncode)
        except OSError as e:
            raise AcceptanceError(f"{where}: cannot run {command[0]}: {e}") from e
    for name, fold in (("median", statistics.median),
                       ("geomean", lambda v: math.exp(sum(math.log(x) for x in v) / len(v)))):
        if name in expr:
            values = [evaluate(e, root, where) for e in expr[name]]
            if not values:
                raise AcceptanceError(f"{where}: {name} of nothing")
            return float(fold(values))
    for name in ("ratio", "percent_apart"):
        if name in expr:
            a, b = (evaluate(e, root, where) for e in expr[name])
            if b == 0:
                raise AcceptanceError(f"{where}: {name} over zero")
            return a / b if name == "ratio" else 100 * abs(a / b - 1)
    raise AcceptanceError(f"{where}: unknown expression {sorted(expr)}")


def provenance(row, root, where):
    """(commit, date) the row was measured at: its run.json's, or the tree's own."""
    if "run" not in row:
        return git(root, "rev-parse", "--short", "HEAD").strip(), datetime.date.today().isoformat()
    try:
        with open(os.path.join(root, row["run"])) as f:
            run = json.load(f)
        return run["commit"], run["date"]
    except (OSError, KeyError, json.JSONDecodeError) as e:
        raise AcceptanceError(f"{where}: cannot read its run {row['run']}: {e}") from e


def shown(paths, count, most=6):
    """The first `most` of `count` paths, and how many more."""
    return ", ".join(paths[:most]) + (f" and {count - most} more" if count > most else "")


def stale(row, commit, root):
    """The covered paths that changed after `commit` (none: current)."""
    covers = row.get("covers", [])
    if not covers or "run" not in row:
        return []
    return git(root, "diff", "--name-only", f"{commit}..HEAD", "--", *covers).split()


def main():
    args = sys.argv[1:]
    if not args or args[0].startswith("-"):
        sys.exit(__doc__)
    area_path = args[0]
    options = dict(zip(args[1::2], args[2::2]))
    root = os.path.abspath(options.get("--root", "."))
    with open(area_path) as f:
        area = json.load(f)
    out_dir = os.path.join(root, options.get("--out", area["out"]))
    rows, failed = [], 0
    for i, row in enumerate(area["rows"]):
        where = f"{area_path} row {i + 1} ('{row.get('row', '?')}')"
        for field in ("row", "measure", "target", "unit"):
            if field not in row:
                raise AcceptanceError(f"{where}: no '{field}'")
        comparison = row.get("pass_if", "<=")
        if comparison not in COMPARISONS:
            raise AcceptanceError(f"{where}: pass_if {comparison!r} is none of {sorted(COMPARISONS)}")
        not_measured = {"row": row["row"], "measured": None, "target": row["target"], "unit": row["unit"], "pass": False,
                        "status": "not measured", "commit": None, "date": None, "pass_if": comparison,
                        "run": row.get("run")}
        if "run" in row and not os.path.exists(os.path.join(root, row["run"])):
            failed += 1
            rows.append(not_measured)
            continue
        try:
            measured = evaluate(row["measure"], root, where)
        except NotInRun as e:
            if "run" not in row:
                raise
            failed += 1
            rows.append({**not_measured, "missing": e.missing})
            continue
        commit, date = provenance(row, root, where)
        changed = stale(row, commit, root)
        passed = COMPARISONS[comparison](round(measured, 6), row["target"])
        status = "stale" if changed else ("pass" if passed else "fail")
        failed += status != "pass"
        entry = {"row": row["row"], "measured": round(measured, 4), "target": row["target"], "unit": row["unit"],
                 "pass": status == "pass", "status": status, "commit": commit, "date": date, "pass_if": comparison}
        if changed:
            entry["changed_since"] = changed[:20]  # the first of them; how many in all beside
            entry["changed_count"] = len(changed)
        rows.append(entry)
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "acceptance.json"), "w") as f:
        json.dump(rows, f, indent=1)
        f.write("\n")
    table = "| row | measured | target | unit | status | measured at |\n|---|---|---|---|---|---|\n" + "".join(
        f"| {r['row']} | {'—' if r['measured'] is None else r['measured']} | {r['pass_if']} {r['target']} | {r['unit']} | "
        f"{r['status'].upper()} | {'—' if r['commit'] is None else r['commit'] + ' ' + r['date']} |\n" for r in rows)
    unmade = [r for r in rows if r["status"] == "not measured"]
    if unmade:
        table += "\nNot measured yet: no run at, or not in the run at\n" + "".join(
            f"- {r['row']}: {r['run']}" + (f" ({r['missing']})" if "missing" in r else "") + "\n" for r in unmade)
    stale_rows = [r for r in rows if r["status"] == "stale"]
    if stale_rows:
        table += "\nStale: measured before a later change to the code it covers:\n" + "".join(
            f"- {r['row']}: {shown(r['changed_since'], r['changed_count'])} changed after {r['commit']}\n" for r in stale_rows)
    with open(os.path.join(out_dir, "summary.md"), "w") as f:
        f.write(f"# Acceptance: {area['area']}\n\nWritten by lab/acceptance/acceptance.py from {os.path.relpath(area_path, root)}.\n\n")
        f.write(table)
    print(table)
    return 1 if failed else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except AcceptanceError as e:
        print(f"acceptance: {e}", file=sys.stderr)
        sys.exit(2)
