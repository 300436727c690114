"""Shared by the fault checks (check_fault_suite.py, check_cupti_taken.py): a result file's
typed rows by benchmark (python/gpucmp_results, the one reader), what each row says, and
a list of named checks."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import gpucmp_results  # noqa: E402


def rows_of(path):
    """{benchmark: typed row}, and {benchmark: Google Benchmark's label}; raises OSError or
    gpucmp_results.ResultFileError (a ValueError)."""
    results = gpucmp_results.load(path)
    rows = {r.benchmark: r for r in results.rows}
    labels = {r.benchmark: results.benchmarks.get(r.name, {}).get("label", "") for r in results.rows}
    return rows, labels


def status_of(row):
    """The row's status ("ok", "oom", ...), or "missing"."""
    return row.status if row is not None else "missing"


def error_of(row):
    """The row's message when it was not measured, else ""."""
    return row.message if row is not None and not row.ok else ""


def measured(row):
    """True when the row exists, is measured and has a positive time."""
    return row is not None and row.ok and row.seconds > 0


class Checks:
    """Prints each check as "ok" or "FAIL" and remembers the failed ones."""

    def __init__(self):
        self.failures = []

    def __call__(self, ok, what):
        print(("ok   " if ok else "FAIL ") + what)
        if not ok:
            self.failures.append(what)
