#!/usr/bin/env python3
"""The compared convolution rows of a conv_sweep run, small enough to commit.

usage: conv-rows.py CONV_SWEEP_JSON OUT_JSON
Reads the Google Benchmark JSON of benchmarks/conv_sweep (as run-ops-comparison.sh writes
it; a file cut off mid-run, as a device call that hit its limit leaves it, is read up to its
last whole row) and writes, for every searched row (provider "cudnn", graph mode), its key
as compare-ops.py names it, its median seconds and the algorithm its label names.
scripts/architecture/acceptance.py --conv OUT_JSON compares them with the committed run.
"""
import json
import sys


def load_cut(path):
    text = open(path).read()
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        end = text.rfind("\n    },\n")
        if end < 0:
            raise
        return json.loads(text[:end] + "\n    }\n  ]\n}")


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    doc = load_cut(sys.argv[1])
    rows = []
    for b in doc.get("benchmarks", []):
        parts = b["name"].split("/")
        if len(parts) < 5 or parts[1] != "cudnn" or parts[4] != "graph" or "error_message" in b:
            continue
        unit = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[b.get("time_unit", "us")]
        rows.append({"key": "/".join([parts[0]] + parts[2:4]), "gpucmp_s": b["real_time"] * unit,
                     "algorithm": b.get("label", "").split("; ")[0]})
    json.dump({"date": doc.get("context", {}).get("date"), "rows": rows}, open(sys.argv[2], "w"), indent=1)
    print(f"conv-rows: {len(rows)} searched rows")


if __name__ == "__main__":
    main()
