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
    ratios, same, compared, reasons = rules.conv_choices(fresh, json.load(open(committed_path)))
    counts = {"compared": compared, "same": same, **{reason: len(keys) for reason, keys in reasons.items()},
              "unexplained_rows": reasons["unexplained"],
              "gpucmp_time_against_committed_geomean": rules.geomean(ratios) if ratios else None}
    with open(out, "w") as f:
        json.dump({k.replace(" ", "_"): v for k, v in counts.items()}, f, indent=1)
        f.write("\n")
    print(json.dumps(counts))


if __name__ == "__main__":
    main()
