# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: gpucmp contributors
"""gpucmp_results: the one Python reader of gpucmp result files (docs/results-format.md).

Standard library only; pandas is optional (ResultFile.dataframe). Install with
`pip install ./python` from the repository, or put python/ on sys.path as the scripts do.

A result file is Google Benchmark's JSON plus a "gpucmp" section of typed rows
(include/gpucmp/measure/result_schema.hpp). Scripts take every fact from those rows: the
status, the mode, the precision, the time, the declared work, power and kernel names, and
(schema 2) what was measured: the problem's axes, the swept axis, the provider, the algorithm,
the output check, the search and the library versions; never from a name's wording, a label
or a message. Schema 1 files are read as rows that describe nothing (axes {}). A file without the section is refused with a
message that says so (`gpucmp-report upgrade OLD.json NEW.json` adds it to an old file).

    rows = gpucmp_results.load("suite.json").rows   # [Row], in run order
    ok = [r for r in rows if r.ok]
    df = gpucmp_results.load("suite.json").dataframe()  # one flat row per run (needs pandas)

`python -m gpucmp_results FILE...` prints each file's rows as a table.
"""
import json
import math

__version__ = "0.1.0"  # the library's (include/gpucmp/version.hpp); a test keeps them the same
SCHEMA_VERSION = 2
LEGACY_SCHEMA_VERSION = 1  # rows without a description
DESCRIBED = ("axes", "sweep_axis", "provider", "algorithm", "verification", "search", "libraries", "latency")
STATUSES = ("ok", "failed", "unsupported", "oom", "skipped", "timeout")
MODES = ("cold", "hot", "graph", "kernel")


class ResultFileError(ValueError):
    """A file that is not a typed gpucmp result file, naming it and what is wrong."""


class Row:
    """One benchmark run. Attributes follow the schema's keys; a key that the row does not
    hold reads None (kernels: [])."""

    __slots__ = ("fields",)

    def __init__(self, fields):
        self.fields = fields

    def __getattr__(self, key):
        fields = object.__getattribute__(self, "fields")
        if key == "ok":
            return fields["status"] == "ok"
        if key in ("kernels", "sample_seconds"):
            return fields.get(key, [])
        if key in ("axes", "libraries"):
            return fields.get(key, {})
        return fields.get(key)

    def __repr__(self):
        return f"Row({self.fields!r})"


class ResultFile:
    def __init__(self, path, context, rows, benchmarks):
        self.path = path
        self.context = context        # Google Benchmark's context, gpucmp's facts included
        self.rows = rows              # [Row], in run order
        self.benchmarks = benchmarks  # Google Benchmark's own entries, by name (labels, counters)

    def records(self):
        """One flat dict per row, in run order, for tables and notebooks: the row's numbers and
        texts under their keys, each axis as "axis.<name>", the output check as
        "verification.<key>", serving latency as "latency.<key>", the search's wall time as
        "search.wall_s", each library as "library.<name>", plus "gpu" (the file's GPU) and "file".
        Lists (kernels, sample_seconds) stay lists."""
        out = []
        for r in self.rows:
            flat = {"file": self.path, "gpu": self.context.get("gpu_name")}
            for key, value in r.fields.items():
                if key == "axes":
                    flat.update({f"axis.{k}": v for k, v in value.items()})
                elif key in ("verification", "latency"):
                    flat.update({f"{key}.{k}": v for k, v in value.items()})
                elif key == "libraries":
                    flat.update({f"library.{k}": v for k, v in value.items()})
                elif key == "search":
                    flat["search.wall_s"] = value.get("wall_s")
                    flat["search.candidates"] = len(value.get("candidates", []))
                else:
                    flat[key] = value
            out.append(flat)
        return out

    def dataframe(self):
        """records() as a pandas DataFrame; ImportError saying so when pandas is missing."""
        try:
            import pandas
        except ImportError as e:
            raise ImportError("gpucmp_results.ResultFile.dataframe needs pandas (pip install pandas); "
                              "records() gives the same rows as dicts without it") from e
        return pandas.DataFrame(self.records())

    def by_benchmark(self):
        """{benchmark: [Row, ...]}: the repetitions of each benchmark."""
        out = {}
        for r in self.rows:
            out.setdefault(r.benchmark, []).append(r)
        return out


def _check_row(path, index, row):
    where = f"{path}: result row {index}"
    if not isinstance(row, dict):
        raise ResultFileError(f"{where} is not an object")
    for key in ("name", "benchmark", "status", "message", "precision"):
        if not isinstance(row.get(key), str):
            raise ResultFileError(f"{where}: '{key}' is missing or not a string")
    if row["status"] not in STATUSES:
        raise ResultFileError(f"{where}: status '{row['status']}' is not one of {', '.join(STATUSES)}")
    if "mode" in row and row["mode"] not in MODES:
        raise ResultFileError(f"{where}: mode '{row['mode']}' is not one of {', '.join(MODES)}")
    axes = row.get("axes", {})
    if not isinstance(axes, dict) or any(
            not (isinstance(v, str) or (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)))
            for v in axes.values()):
        raise ResultFileError(f"{where}: 'axes' is not an object of numbers and texts")
    if "sweep_axis" in row and not isinstance(axes.get(row["sweep_axis"]), (int, float)):
        raise ResultFileError(f"{where}: 'sweep_axis' {row['sweep_axis']!r} is not a numeric axis of the row")
    for key, value in row.items():
        if key in ("name", "benchmark", "status", "message", "precision", "mode", "kernels", "sparsity", "latency",
                   "sample_seconds") + DESCRIBED:
            continue
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or value < 0:
            raise ResultFileError(f"{where}: '{key}' is {value!r} (expected a finite number >= 0)")
    samples = row.get("sample_seconds", [1.0])
    if not isinstance(samples, list) or not samples or any(
            not isinstance(t, (int, float)) or isinstance(t, bool) or not math.isfinite(t) or t <= 0 for t in samples):
        raise ResultFileError(f"{where}: 'sample_seconds' is not a non-empty list of finite times > 0")
    if row["status"] == "ok" and not row.get("seconds", 0) > 0:
        raise ResultFileError(f"{where}: a measured row without a positive 'seconds'")


def parse(doc, path="<result>"):
    """The typed rows of a parsed result file `doc`."""
    section = doc.get("gpucmp") if isinstance(doc, dict) else None
    if not isinstance(section, dict):
        raise ResultFileError(f"{path}: has no typed gpucmp results (no \"gpucmp\" section with a schema_version): "
                              "written before result schema 1, by a main other than gpucmp::benchmark_main, or "
                              "without --benchmark_out; gpucmp-report upgrade OLD.json NEW.json adds it")
    version = section.get("schema_version")
    if version not in (SCHEMA_VERSION, LEGACY_SCHEMA_VERSION):
        raise ResultFileError(f"{path}: written with result schema {version}; this reader knows schemas "
                              f"{SCHEMA_VERSION} and {LEGACY_SCHEMA_VERSION}")
    rows = section.get("results")
    if not isinstance(rows, list):
        raise ResultFileError(f"{path}: its gpucmp section has no results list")
    for i, row in enumerate(rows):
        _check_row(path, i, row)
        if version == LEGACY_SCHEMA_VERSION:  # schema 1 wrote no description
            for key in DESCRIBED:
                row.pop(key, None)
    benchmarks = {b.get("name"): b for b in doc.get("benchmarks", []) if isinstance(b, dict)}
    return ResultFile(path, doc.get("context", {}), [Row(r) for r in rows], benchmarks)


def load(path):
    """The result file at `path`; raises OSError, or ResultFileError naming what is wrong."""
    with open(path) as f:
        try:
            doc = json.load(f)
        except ValueError as e:
            raise ResultFileError(f"{path}: malformed JSON: {e}") from e
    return parse(doc, path)
