#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: gpucmp contributors
"""Host test of scripts/architecture/acceptance.py's spin-table row on synthetic tables: a
median counts as moved past 2 % or twice the old cell's noise; against a table from before
the change (--spin-before) both must come from one GPU, or the comparison is refused."""
import importlib.util
import json
import os
import sys
import tempfile

script = sys.argv[1]
spec = importlib.util.spec_from_file_location("architecture_acceptance", script)
acceptance = importlib.util.module_from_spec(spec)
spec.loader.exec_module(acceptance)
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)


def table(uuid, cold_us, hot_us, noise=0.001):
    def cell(us):
        return {"gpu": {"median_s": us * 1e-6, "relative_noise": noise}}
    return {"gpu": {"uuid": uuid}, "rows": [
        {"nominal_s": 2e-6, "cold": cell(cold_us), "hot": cell(hot_us), "graph": cell(2.5), "kernel": cell(2.56)},
        {"nominal_s": 1e-3, "cold": cell(1002.6), "hot": cell(1002.7), "graph": cell(1002.5), "kernel": cell(1000.5)}]}


def rows_of(new, old, same_machine):
    got = []
    with tempfile.TemporaryDirectory() as d:
        paths = []
        for name, doc in (("new.json", new), ("old.json", old)):
            paths.append(os.path.join(d, name))
            with open(paths[-1], "w") as f:
                json.dump(doc, f)
        acceptance.spin_rows(lambda *r: got.append(r), paths[0], paths[1], same_machine)
    return got


# Another machine's committed table: the 2 us cold and hot cells moved 6 % and 3 %.
got = rows_of(table("GPU-b", 4.61, 3.26), table("GPU-a", 4.90, 3.36), False)
check(len(got) == 1 and got[0][1] == 2 and got[0][4] is False, f"two cells moved against the committed table: {got}")
check("the committed table" in got[0][0] and "(of 8)" in got[0][0], f"the row names what it compared: {got}")
# The same GPU before the change: within 2 % everywhere passes, and says so.
got = rows_of(table("GPU-b", 4.61, 3.26), table("GPU-b", 4.64, 3.27), True)
check(len(got) == 1 and got[0][1] == 0 and got[0][4] is True, f"unchanged on one machine passes: {got}")
check("same GPU's table before the change" in got[0][0], f"the row names the before table: {got}")
# A noisy old cell widens its own allowance: 5 % noise allows 10 %.
got = rows_of(table("GPU-b", 4.61, 3.26), table("GPU-b", 4.61, 3.56, noise=0.05), True)
check(got[0][1] == 0, f"twice a noisy cell's noise is allowed: {got}")
# A before table from another GPU is refused, not compared.
try:
    rows_of(table("GPU-b", 4.61, 3.26), table("GPU-a", 4.90, 3.36), True)
    check(False, "a before table from another GPU was compared")
except SystemExit as e:
    check("same GPU" in str(e), f"the refusal says why: {e}")

for f in failures:
    print("FAIL:", f)
print("spin rows:", "ok" if not failures else f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
