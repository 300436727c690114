# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: gpucmp contributors
"""Synthetic gpucmp result files for the peer scripts' host tests: Google Benchmark entries
plus the typed "gpucmp" section (docs/results-format.md) that the scripts read."""
MODES = ("cold", "hot", "graph", "kernel")
UNITS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}


def typed(benchmarks, context=None):
    """A result file of `benchmarks` (dicts with name, real_time, time_unit and optionally
    error_occurred/error_message and the declared items, flops, bytes_read); each gets its
    typed row."""
    rows = []
    for b in benchmarks:
        benchmark = b["name"].split("/iterations:")[0]
        modes = [p for p in benchmark.split("/") if p in MODES]
        row = {"name": b["name"], "benchmark": benchmark, "repetition_index": 0, "precision": "none",
               "status": "failed" if b.get("error_occurred") else "ok", "message": b.get("error_message", "")}
        if modes:
            row["mode"] = modes[-1]
        if row["status"] == "ok":
            row["seconds"] = b["real_time"] * UNITS[b.get("time_unit", "ns")]
        for declared in ("items", "flops", "bytes_read"):  # declared work, where the entry gives it
            if declared in b:
                row[declared] = b[declared]
        rows.append(row)
    return {"context": context or {}, "benchmarks": list(benchmarks), "gpucmp": {"schema_version": 1, "results": rows}}
