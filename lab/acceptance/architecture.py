#!/usr/bin/env python3
"""The architecture issue's acceptance rows, computed from the tree and from run outputs.

usage: acceptance.py REPO_ROOT OUT_DIR [--compat FILE] [--h200-compat FILE] [--report GPUCMP_REPORT]
                     [--ops FILE] [--conv FILE] [--resnet50 FILE] [--spin FILE,... [--spin-before FILE,...]]
Writes OUT_DIR/acceptance.json (a list of {row, measured, target, unit, pass}) and
OUT_DIR/summary.md. Rows measured on the tree are always made; rows that need a run are
made only from the files given, never filled in:
  --compat FILE       scripts/gbench-compat.sh's table (build-gbench/compat.md)
  --h200-compat FILE  the same table from the H200 (Google Benchmark 1.8.3 there)
  --report BINARY     gpucmp-report, for the random-names test of the report's reader
  --ops FILE[,FILE]   ops_vs_pytorch.json of scripts/peers/run-ops-comparison.sh (on the
                      operation contract: lab/runs/contract-check.sh, one per part)
  --conv FILE         lab/acceptance/conv-rows.py's rows of a conv_sweep run (gpucmp's
                      side alone, when the comparison did not finish): their times against
                      the committed run's gpucmp times, and their choices
  --resnet50 FILE     resnet50_vs_pytorch.json of scripts/peers/run-resnet50-comparison.sh
  --spin FILE[,FILE]  spin_table.json of benchmarks/spin_table (several: one per round, each
                      cell the median of the rounds' medians)
  --spin-before FILE[,FILE]  the same table from the code before the refactor, run on the same
                      GPU in the same call (contract-check.sh's spin_before part, its rounds):
                      --spin is compared with it instead of the committed table, which came
                      from another machine (its GPU UUID differs: docs/architecture.md)
Each is compared with the committed file of the same name under results/h200/: every ops
section's geometric-mean ratio and every precision's CUDA-graph ResNet-50 ratio within 2 %,
the same algorithm chosen in every compared GEMM and convolution row or the reason it is not
(a tie in this run's own search, the committed choice timed slower in it, or a row no slower
than the committed one: the issue's "or say why not"; every row that differs is printed with
its reason), and every spin-table median within its noise.
"""
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)  # acceptance_rows
sys.path.insert(0, os.path.join(here, "..", "..", "python"))  # gpucmp_results, the one reader of gpucmp's files
from acceptance_rows import Rows  # noqa: E402  (lab/acceptance/acceptance_rows.py)


def grep(root, pattern, paths):
    """Lines under paths (relative to root) matching the regex pattern: [(file, line)]."""
    hits = []
    rx = re.compile(pattern)
    for base in paths:
        for folder, _, names in os.walk(os.path.join(root, base)):
            for name in names:
                path = os.path.join(folder, name)
                try:
                    for number, line in enumerate(open(path, encoding="utf-8", errors="replace"), start=1):
                        if rx.search(line):
                            hits.append((os.path.relpath(path, root), number))
                except OSError:
                    continue
    return hits


def compat_rows(path):
    rows = {}
    for line in open(path):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0] not in ("Google Benchmark", "---"):
            rows[cells[0]] = cells[1] == "PASS" and cells[2] == "PASS" and "FAIL" not in cells[3]
    return rows


def geomean(values):
    values = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def ops_rows(row, new_paths, old_path):
    old = json.load(open(old_path))
    new = {"sections": {}}
    searches = {}  # key -> {algorithm identity: fastest µs} from each part's search_log.jsonl
    for path in new_paths.split(","):  # one file per part, when the parts ran apart
        new["sections"].update(json.load(open(path))["sections"])
        searches.update(search_times(os.path.join(os.path.dirname(path), "search_log.jsonl")))
    differing, compared = [], 0  # compared: rows in both runs; differing: (key, before, after, reason)
    for name, section in old["sections"].items():
        fresh = new["sections"].get(name)
        if fresh is None:
            row(f"ops vs PyTorch, {name}: not in the new run", "missing", 2, "% apart", False)
            continue
        deviation = 100 * abs(fresh["geomean"] / section["geomean"] - 1)
        row(f"ops vs PyTorch, {name}: geomean ratio {fresh['geomean']:.3f} against the committed {section['geomean']:.3f}",
            round(deviation, 2), 2, "% apart", deviation <= 2)
        chosen = {r["key"]: r for r in fresh["rows"]}
        for r in section["rows"]:
            if r["key"] not in chosen:
                continue
            compared += 1
            f = chosen[r["key"]]
            before, after = r.get("algorithm", ""), f.get("algorithm", "")
            if after == before:
                continue
            # The cost of a changed choice is gpucmp's own time: the peer's time moves with the
            # machine and the run, not with gpucmp's choice.
            timed = searches.get(r["key"], {})
            reason = changed_choice_reason(timed.get(algorithm_identity(after)), timed.get(algorithm_identity(before)),
                                           r.get("gpucmp_s"), f.get("gpucmp_s"))
            differing.append((r["key"], before, after, reason))
    counts = {reason: sum(1 for d in differing if d[3] == reason) for reason in CHANGE_REASONS}
    row(f"ops searches: rows whose chosen algorithm differs from the committed run without a reason (of {compared}; "
        f"{len(differing)} differ: {counts['tie']} ties, the committed one timed within 3 % of the chosen one in the same "
        f"search; {counts['slower in this search']} where the committed one timed more than 3 % slower in the same search; "
        f"{counts['no slower']} no slower, gpucmp's time within 2 % of the committed one's or below it)",
        counts["unexplained"], 0, "rows", counts["unexplained"] == 0)
    for key, before, after, reason in differing:
        print(f"acceptance: {key}: committed '{before}', now '{after}' ({reason})")


# Why a search may choose another algorithm than the committed run and still be right, in the
# order they are tried: the two timed alike in this run's own search (within 3 % either way,
# under the search's own noise); the committed choice timed more than 3 % slower in this run's
# search (the search did its job on this machine's libraries and clocks); or the row lost
# nothing by the change (its result within the 2 % of the committed one, or better).
# Anything else is unexplained: the committed choice was faster in this search and the search
# passed it over (a selection bug), or it was not timed at all (the candidates changed) and
# the row got slower.
CHANGE_REASONS = ("tie", "slower in this search", "no slower", "unexplained")


def changed_choice_reason(chosen_us, committed_us, committed_s, now_s):
    """`chosen_us`/`committed_us`: this run's search times of its choice and of the committed
    choice (None: not timed); `committed_s`/`now_s`: the row's final time (gpucmp's) in the
    committed run and in this one."""
    if chosen_us and committed_us:
        if committed_us > 1.03 * chosen_us:
            return "slower in this search"
        if committed_us >= chosen_us / 1.03:
            return "tie"
    if committed_s and now_s and now_s <= 1.02 * committed_s:
        return "no slower"
    return "unexplained"


def search_times(path):
    """{row key: {algorithm identity: fastest µs}} from a run's search_log.jsonl. The log names
    benchmarks (gemm/cublaslt/fp16/MxNxK/graph); the comparison's key leaves out the library
    and the mode (gemm/fp16/MxNxK). The heuristic-only control rows are not searches."""
    times = {}
    if not os.path.exists(path):
        return times
    for line in open(path):
        entry = json.loads(line)
        parts = entry["benchmark"].split("/")
        if len(parts) < 4 or parts[1].endswith("_heuristic"):
            continue
        key = "/".join([parts[0]] + parts[2:-1])
        timed = times.setdefault(key, {})
        for c in entry["candidates"]:
            if c.get("failure") or not c.get("us"):
                continue
            identity = algorithm_identity(c["algorithm"])
            timed[identity] = min(c["us"], timed.get(identity, c["us"]))
    return times


def algorithm_identity(description):
    """As conv-rows.py: a description without its workspace and how it was chosen."""
    return re.sub(r" \{[^}]*\}", "", re.split(r" ws \d+ B", description)[0])


def conv_choices(fresh, old):
    """Against the committed run `old` (its "ResNet-50 convolutions" sections), each of conv-rows.py's
    rows `fresh` (by key): (gpucmp's time ratios, rows that chose the same algorithm, compared rows,
    {reason: keys} of the changed choices)."""
    ratios, same, compared = [], 0, 0
    reasons = {reason: [] for reason in CHANGE_REASONS}
    for name, section in old["sections"].items():
        if not name.startswith("ResNet-50 convolutions"):
            continue
        for r in section["rows"]:
            f = fresh.get(r["key"])
            if f is None:
                continue
            compared += 1
            ratios.append(f["gpucmp_s"] / r["gpucmp_s"])
            if algorithm_identity(f["algorithm"]) == algorithm_identity(r["algorithm"]):
                same += 1
                continue
            candidates = f.get("candidates", {})
            reason = changed_choice_reason(candidates.get(algorithm_identity(f["algorithm"])),
                                           candidates.get(algorithm_identity(r["algorithm"])), r["gpucmp_s"], f["gpucmp_s"])
            reasons[reason].append(r["key"])
    return ratios, same, compared, reasons


def conv_rows(row, new_path, old_path):
    new, old = json.load(open(new_path)), json.load(open(old_path))
    ratios, same, compared, reasons = conv_choices({r["key"]: r for r in new["rows"]}, old)
    g = geomean(ratios)
    deviation = 100 * abs(g - 1) if math.isfinite(g) else float("nan")
    row(f"ResNet-50 convolutions, gpucmp alone: time against the committed run's gpucmp time, geomean {g:.4f} "
        f"over {compared} rows (min {min(ratios, default=float('nan')):.3f}, max {max(ratios, default=float('nan')):.3f})",
        round(deviation, 2) if math.isfinite(deviation) else "missing", 2, "% apart",
        math.isfinite(deviation) and deviation <= 2)
    explained = same + sum(len(reasons[r]) for r in CHANGE_REASONS if r != "unexplained")
    row(f"ResNet-50 convolutions: the search chose the committed run's algorithm ({same}), or the committed one timed within "
        f"3 % of the chosen one in the same search, a tie ({len(reasons['tie'])}), or more than 3 % slower in the same search "
        f"({len(reasons['slower in this search'])}), or another whose time is within 2 % of the "
        f"committed one's or below, no slower ({len(reasons['no slower'])}: {', '.join(reasons['no slower']) or 'none'}); "
        f"unexplained: {', '.join(reasons['unexplained']) or 'none'}",
        explained, compared, "rows", compared > 0 and explained == compared)


def resnet50_rows(row, new_path, old_path):
    new, old = json.load(open(new_path)), json.load(open(old_path))
    for dtype in sorted({r["dtype"] for r in old["rows"]}):
        def graph_ratios(doc):
            return [r["ratio"] for r in doc["rows"] if r["dtype"] == dtype and r["mode"] == "graph"]
        before, after = geomean(graph_ratios(old)), geomean(graph_ratios(new))
        deviation = 100 * abs(after / before - 1)
        row(f"ResNet-50 {dtype} CUDA graph vs PyTorch: geomean ratio {after:.3f} over the batches against the committed "
            f"{before:.3f}", round(deviation, 2) if math.isfinite(deviation) else "missing", 2, "% apart",
            math.isfinite(deviation) and deviation <= 2)


def gpu_uuid(table):
    return table.get("gpu", {}).get("uuid", "")


def spin_rows(row, new_paths, old_paths, same_machine=False):
    """Every median of the committed (or, same_machine, the before-the-change) spin table
    against the new one: within 2 % or twice the old cell's noise. The noise rule holds
    within one machine only, so before tables must come from the new tables' GPU. Each side
    may be several tables (comma-separated: contract-check.sh's alternating spin_before
    rounds, one process each); a cell is then the median of its rounds' medians, since a 2 us
    cell moves a few % from process to process while its noise within one run is far less."""
    new = [json.load(open(p)) for p in new_paths.split(",")]
    old = [json.load(open(p)) for p in old_paths.split(",")]
    uuids_new, uuids_old = {gpu_uuid(t) for t in new}, {gpu_uuid(t) for t in old}
    if same_machine and (len(uuids_new | uuids_old) != 1 or "" in uuids_new):
        sys.exit(f"acceptance: --spin-before {old_paths} ran on GPU {sorted(uuids_old)}, --spin {new_paths} on "
                 f"{sorted(uuids_new)}: a before/after comparison needs the same GPU")
    if not same_machine and uuids_new != uuids_old:
        print(f"acceptance: spin: the committed table ran on GPU {', '.join(sorted(uuids_old)) or '?'}, this one on "
              f"{', '.join(sorted(uuids_new)) or '?'}; --spin-before compares on one machine")

    def cells(tables):
        """{(nominal_s, mode): ([median_s per table], largest relative noise)}"""
        out = {}
        for t in tables:
            for r in t["rows"]:
                for m in ("cold", "hot", "graph", "kernel"):
                    if m in r:
                        medians, noise = out.get((r["nominal_s"], m), ([], 0.0))
                        out[(r["nominal_s"], m)] = (medians + [r[m]["gpu"]["median_s"]],
                                                    max(noise, r[m]["gpu"].get("relative_noise", 0)))
        return out

    before, after = cells(old), cells(new)
    outside, compared = [], 0
    for key, (medians, noise) in before.items():
        if key not in after or len(medians) != len(old) or len(after[key][0]) != len(new):
            continue
        compared += 1
        a, b = statistics.median(medians), statistics.median(after[key][0])
        if abs(b / a - 1) > max(0.02, 2 * noise):
            rounds = "" if len(old) == len(new) == 1 else (
                f" (rounds {' / '.join(f'{m * 1e6:.2f}' for m in medians)} -> {' / '.join(f'{m * 1e6:.2f}' for m in after[key][0])})")
            outside.append(f"{key[0] * 1e6:g} us {key[1]}: {a * 1e6:.2f} -> {b * 1e6:.2f}{rounds}")
    against = "the same GPU's table before the change" if same_machine else "the committed table"
    if len(old) > 1 or len(new) > 1:
        against += f", each cell the median of {len(old)} and {len(new)} runs' medians"
    row(f"spin table: medians that moved by more than 2 % or twice their noise against {against} (of {compared})",
        len(outside), 0, "cells", compared > 0 and not outside)
    for line in outside:
        print("acceptance: spin " + line)


def main():
    args = sys.argv[1:]
    if len(args) < 2:
        sys.exit(__doc__)
    root, out = args[0], args[1]
    options = dict(zip(args[2::2], args[3::2]))
    rows = Rows()
    row = rows.add

    internal = grep(root, r"benchmark::internal", ["include"])
    row("lines in include/ that name benchmark::internal", len(internal), 0, "lines", not internal)
    if "--compat" in options:
        c = compat_rows(options["--compat"])
        wanted = ["system", "1.9.5", "267a1115"]
        passed = [v for v in wanted if c.get(v)]
        row("plain and fixture benchmarks build and pass the adapter's host tests against Google Benchmark "
            "1.7.1 (system), 1.9.5 and main 267a1115", len(passed), len(wanted), "versions", len(passed) == len(wanted))
    if "--h200-compat" in options:
        c = compat_rows(options["--h200-compat"])
        row("the same on the H200 against its Google Benchmark 1.8.3", int(bool(c.get("system"))), 1, "passed",
            c.get("system"))
    timing = grep(root, r"cudaEventRecord|cudaStreamBeginCapture|time_back_to_back", ["include/gpucmp/ops", "include/gpucmp/models"])
    row("timing outside the engine: cudaEventRecord, graph capture or time_back_to_back in ops/ and models/",
        len(timing), 0, "lines", not timing)
    # The report's reader of result files (parse_result_file; the legacy reader serves only
    # `gpucmp-report upgrade`): what in it parses a name, a message or a rate counter.
    model = open(os.path.join(root, "tools", "report", "model.hpp")).read()
    start = model.find("inline result_file parse_result_file(")
    body = model[start:model.find("\n}\n", start)] if start >= 0 else ""
    prose = len(re.findall(r"precision_of\(|kind_of_error\(|clean_name\(|\"TFLOP/s\"|\"GB/s\"|error_message", body))
    random_ok = None
    if "--report" in options:  # the random-names test: status, precision and work from the fields
        with tempfile.TemporaryDirectory() as t:
            done = subprocess.run([sys.executable, os.path.join(root, "tests", "report", "random_names_check.py"),
                                   options["--report"], os.path.join(root, "tests", "report", "inputs", "h200_suite.json"), t],
                                  capture_output=True, text=True)
            random_ok = done.returncode == 0
    row("the report taking facts from names or messages: name, message or rate-counter parsing in its reader"
        + ("" if random_ok is None else f" (random-names test {'passed' if random_ok else 'FAILED'})"),
        prose, 0, "calls", bool(body) and prose == 0 and random_ok is not False)
    results = subprocess.run([sys.executable, os.path.join(root, "scripts", "check-results.py"), root],
                             capture_output=True, text=True)
    size = re.search(r"(\d+) files, (\d+) bytes", results.stdout)
    row("results/ at most 1 MB, every file named by a doc, script or test",
        int(size.group(2)) if size else -1, 1_000_000, "bytes", results.returncode == 0)
    top = sorted(n for n in os.listdir(os.path.join(root, "include", "gpucmp"))
                 if os.path.isfile(os.path.join(root, "include", "gpucmp", n)))
    extra = [n for n in top if n not in ("bench.hpp", "core.hpp", "version.hpp")]
    row("headers at the top of include/gpucmp/ other than the umbrellas and version.hpp", len(extra), 0, "headers",
        not extra)
    layers = subprocess.run([sys.executable, os.path.join(root, "scripts", "check-include-layers.py"), root],
                            capture_output=True, text=True)
    row("includes that point up a layer (scripts/check-include-layers.py)",
        layers.stdout.count("an include may not point up"), 0, "includes", layers.returncode == 0)
    doc = os.path.join(root, "docs", "architecture.md")
    text = open(doc).read() if os.path.exists(doc) else ""
    recipes = re.findall(r"^### Adding (.+)$", text, flags=re.M)
    sections = re.split(r"^### ", text, flags=re.M)[1:]
    followed = [s.split("\n", 1)[0] for s in sections if s.startswith("Adding") and re.search(r"Followed for|Example: ", s)]
    row(f"docs/architecture.md recipes followed once ({', '.join(followed) or 'none'} of {len(recipes)})",
        len(followed), len(recipes) if recipes else 4, "recipes", bool(recipes) and len(followed) == len(recipes))
    committed = os.path.join(root, "results", "h200")
    if "--ops" in options:
        ops_rows(row, options["--ops"], os.path.join(committed, "ops", "ops_vs_pytorch.json"))
    if "--conv" in options:
        conv_rows(row, options["--conv"], os.path.join(committed, "ops", "ops_vs_pytorch.json"))
    if "--resnet50" in options:
        resnet50_rows(row, options["--resnet50"], os.path.join(committed, "models", "resnet50_vs_pytorch.json"))
    if "--spin-before" in options and "--spin" not in options:
        sys.exit("acceptance: --spin-before needs --spin (the table after the change)")
    if "--spin" in options:
        before = options.get("--spin-before")
        spin_rows(row, options["--spin"], before or os.path.join(committed, "spin_table.json"), before is not None)
    rows.write(out)


if __name__ == "__main__":
    main()
