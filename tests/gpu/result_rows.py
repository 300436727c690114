"""Shared by the fault checks (check_fault_suite.py, check_cupti_taken.py): the rows of a
Google Benchmark JSON file by name, what each row says, and a list of named checks."""
import json


def rows_of(path):
    """{name without Google Benchmark's /iterations:... suffix: row}; raises OSError or ValueError."""
    with open(path) as f:
        return {b["name"].split("/iterations")[0]: b for b in json.load(f)["benchmarks"]}


def error_of(row):
    """The row's error message, or "" when it was measured (or is missing)."""
    return row.get("error_message", "") if row and row.get("error_occurred") else ""


def measured(row):
    """True when the row exists, has no error and a positive time."""
    return row is not None and not row.get("error_occurred") and row.get("real_time", 0) > 0


class Checks:
    """Prints each check as "ok" or "FAIL" and remembers the failed ones."""

    def __init__(self):
        self.failures = []

    def __call__(self, ok, what):
        print(("ok   " if ok else "FAIL ") + what)
        if not ok:
            self.failures.append(what)
