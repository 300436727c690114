#!/usr/bin/env python3
"""The compared convolution rows of a conv_sweep run, small enough to commit.

usage: conv-rows.py CONV_SWEEP_JSON OUT_JSON [SEARCH_LOG]
Reads the Google Benchmark JSON of benchmarks/conv_sweep (as run-ops-comparison.sh writes
it; a file cut off mid-run, as a device call that hit its limit leaves it, is read up to its
last whole row) and writes, for every searched row (provider "cudnn", graph mode), its key
as compare-ops.py names it, its median seconds and the algorithm its label names. With the
run's search log (--gpucmp_search_log, search_log.jsonl) each row also gets "candidates":
{algorithm: microseconds} of every algorithm its search timed, so a changed choice can be
told from a tie (the committed algorithm timed as fast as the new one in the same search).
cuDNN offers one engine in several configurations (knobs it does not print): an algorithm's
time is its fastest configuration's, as the row's algorithm names the engine alone. Algorithms
more than 1.35x the fastest are left out (never a tie; they would triple the file).
lab/acceptance/architecture.py --conv OUT_JSON compares them with the committed run.
"""
import json
import re
import sys


def algorithm_identity(description):
    """An algorithm's description without its workspace and how it was chosen:
    "cuDNN legacy IMPLICIT_PRECOMP_GEMM (1) math TENSOR_OP", "cuDNN engine 58 [TENSOR_CORE]"."""
    return re.sub(r" \{[^}]*\}", "", re.split(r" ws \d+ B", description)[0])


def row_key(name):
    parts = name.split("/")
    return "/".join([parts[0]] + parts[2:4]) if len(parts) >= 4 else name


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
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    doc = load_cut(sys.argv[1])
    searched = {}
    if len(sys.argv) == 4:
        for line in open(sys.argv[3]):
            if not line.strip():
                continue
            entry = json.loads(line)
            if "/graph" not in entry["benchmark"]:
                continue
            fastest = {}
            for c in entry["candidates"]:
                if not c["failure"]:
                    key = algorithm_identity(c["algorithm"])
                    fastest[key] = min(fastest.get(key, c["us"]), c["us"])
            best = min(fastest.values(), default=0)
            searched[row_key(entry["benchmark"])] = {k: us for k, us in fastest.items() if us <= 1.35 * best}
    rows = []
    for b in doc.get("benchmarks", []):
        parts = b["name"].split("/")
        if len(parts) < 5 or parts[1] != "cudnn" or parts[4] != "graph" or "error_message" in b:
            continue
        unit = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[b.get("time_unit", "us")]
        row = {"key": "/".join([parts[0]] + parts[2:4]), "gpucmp_s": b["real_time"] * unit,
               "algorithm": b.get("label", "").split("; ")[0]}
        if row["key"] in searched:
            row["candidates"] = searched[row["key"]]
        rows.append(row)
    json.dump({"date": doc.get("context", {}).get("date"), "rows": rows}, open(sys.argv[2], "w"), indent=0)
    print(f"conv-rows: {len(rows)} searched rows")


if __name__ == "__main__":
    main()
