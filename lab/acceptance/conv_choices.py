#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: gpucmp contributors
"""How a convolution sweep's searches chose against a committed run's: a small JSON the
acceptance tool reads (lab/acceptance/acceptance.py).

usage: conv_choices.py CONV_SWEEP_JSON SEARCH_LOG COMMITTED_OPS_VS_PYTORCH_JSON OUT_JSON
For each compared row (the committed file's "ResNet-50 convolutions" sections): the same
algorithm (engine or legacy algorithm, knobs aside), or a changed choice and why, by the rule of
lab/acceptance/architecture.py (changed_choice_reason): the committed algorithm timed within
3 % of the new choice in the same search (a tie), more than 3 % slower in it, or not timed but
the row no slower; anything else is unexplained. Also gpucmp's time against the committed run's.
"""
import importlib.util
import json
import math
import os
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(os.path.dirname(here))


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    sweep, log, committed_path, out = sys.argv[1:]
    rules = load("architecture_acceptance", os.path.join(here, "architecture.py"))
    with tempfile.TemporaryDirectory() as t:
        rows_path = os.path.join(t, "rows.json")
        subprocess.run([sys.executable, os.path.join(here, "conv-rows.py"), sweep, rows_path, log],
                       check=True, stdout=subprocess.DEVNULL)
        fresh = {r["key"]: r for r in json.load(open(rows_path))["rows"]}
    committed = json.load(open(committed_path))
    counts = {"compared": 0, "same": 0, **{reason: 0 for reason in rules.CHANGE_REASONS}}
    unexplained, ratios = [], []
    for name, section in committed["sections"].items():
        if not name.startswith("ResNet-50 convolutions"):
            continue
        for r in section["rows"]:
            f = fresh.get(r["key"])
            if f is None:
                continue
            counts["compared"] += 1
            ratios.append(f["gpucmp_s"] / r["gpucmp_s"])
            identity = rules.algorithm_identity
            if identity(f["algorithm"]) == identity(r["algorithm"]):
                counts["same"] += 1
                continue
            c = f.get("candidates", {})
            reason = rules.changed_choice_reason(c.get(identity(f["algorithm"])), c.get(identity(r["algorithm"])),
                                                 r["gpucmp_s"], f["gpucmp_s"])
            counts[reason] += 1
            if reason == "unexplained":
                unexplained.append(r["key"])
    counts["unexplained_rows"] = unexplained
    counts["gpucmp_time_against_committed_geomean"] = math.exp(sum(map(math.log, ratios)) / len(ratios)) if ratios else None
    with open(out, "w") as f:
        json.dump({k.replace(" ", "_"): v for k, v in counts.items()}, f, indent=1)
        f.write("\n")
    print(json.dumps(counts))


if __name__ == "__main__":
    main()
