#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: gpucmp contributors
"""gpucmp's operation sweeps next to PyTorch, row by row, with ratios and geometric means.

Usage: compare-ops.py --gpucmp A.json [B.json ...] --torch torch_ops.json [...] --out-md X.md --out-json X.json

Inputs: Google Benchmark JSON from gemm_sweep / conv_sweep / bandwidth_sweep (gpucmp's
per-launch medians) and torch_ops.py's rows. The ratio is PyTorch time / gpucmp time
(> 1: gpucmp is faster). Also: the timed search against cuBLASLt's heuristic (gpucmp's own
rows), and the device copy kernel against cudaMemcpyAsync. Prints the acceptance checks of
the operations issue; exits 1 when a row is missing or an input could not be read (a run
cut off while writing its JSON: the other files still make the table), 0 otherwise (the bars
are reported, not enforced, because they are performance claims about one machine).
"""
import argparse
import json
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import gpucmp_results  # noqa: E402  (python/gpucmp_results: the one reader of gpucmp's files)


CONTEXT = {}
LARGE_GEMM_WINDOWS = set()  # gpucmp's fixed sampling windows (s) of the 8192^3 rows; 0: the noise rule
SKIPPED = []  # input files that could not be read (e.g. a run cut off while writing its JSON)


def load(path):
    """The JSON document in `path`, or None (recorded in SKIPPED, with a warning) when it is
    missing or unreadable: the rows of the other files still make a table."""
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        print(f"compare-ops: skipping {path}: {e}", file=sys.stderr)
        SKIPPED.append(path)
        return None


def median(values):
    ordered = sorted(values)
    n = len(ordered)
    return ordered[n // 2] if n % 2 else 0.5 * (ordered[n // 2 - 1] + ordered[n // 2])


def gpucmp_rows(paths):
    """{(provider, key, mode): (seconds, algorithm)} from gpucmp result files' typed rows; a row
    that several files hold (repeated rounds) gets the median of its times. The key's parts
    follow the naming rule op/provider/dtype/shape/mode (the peer's rows are keyed alike);
    status, mode, time and the chosen algorithm are the rows' own fields (a schema-1 file,
    whose rows name no algorithm, gives its label's first note: the legacy path)."""
    rounds = {}
    for path in paths:
        try:
            results = gpucmp_results.load(path)
        except (OSError, gpucmp_results.ResultFileError) as e:
            print(f"compare-ops: skipping {path}: {e}", file=sys.stderr)
            SKIPPED.append(path)
            continue
        for key in ("cublasLt_version", "cudnn_version", "cusparseLt_version", "gpu_name", "gpu_driver_version"):
            if key in results.context:
                CONTEXT[key] = results.context[key]
        for r in results.rows:
            if not r.ok or r.mode is None:
                continue
            parts = r.benchmark.split("/")
            if len(parts) < 5:
                continue
            op, provider, dtype, shape = parts[:4]
            entry = results.benchmarks.get(r.name, {})
            if op == "gemm" and shape.startswith("8192x8192x8192") and r.mode == "graph":
                LARGE_GEMM_WINDOWS.add(float(entry.get("window_s", 0)))
            algorithm = r.algorithm if r.algorithm is not None else entry.get("label", "").split(";")[0]
            rounds.setdefault((provider, f"{op}/{dtype}/{shape}", r.mode), []).append((r.seconds, algorithm))
    return {key: (median([t for t, _ in runs]), runs[0][1]) for key, runs in rounds.items()}


def torch_rows(paths):
    """{key: row} from torch_ops.py files; repeated rounds get the median time."""
    rounds, meta, loaded = {}, None, 0
    for path in paths:
        doc = load(path)
        if doc is None:
            continue
        loaded += 1
        meta = meta or doc["meta"]
        for r in doc["rows"]:
            rounds.setdefault(r["key"], []).append(r)
    rows = {}
    for key, runs in rounds.items():
        row = dict(runs[0])
        row["seconds"] = median([r["seconds"] for r in runs])
        rows[key] = row
    return rows, meta, loaded


def torch_calls(path):
    """{key: {"call": "algo N, A type x B type, workspace limit W", "kernels": [names]}} from
    torch_gemm_calls.py's lines: the algorithm id cuBLASLt's heuristic returned to PyTorch (it
    asks for one), the operand types it passed, and the kernels the call launched (profiler).
    {} when the file is absent (the gemm part did not run)."""
    if not path or not os.path.exists(path):
        return {}
    doc = load(path)
    calls = {}
    for key, lines in (doc or {}).items():
        algo = types = limit = None
        kernels = [line[len("kernel: "):] for line in lines if line.startswith("kernel: ")]
        for line in lines:
            if "heuristicResults=[" in line and algo is None:
                algo = line.split("heuristicResults=[", 1)[1].split("]")[0].split(",")[0].strip()
            if "AlgoGetHeuristic] Adesc=[type=" in line and types is None:
                a = line.split("Adesc=[type=", 1)[1].split()[0]
                b = line.split("Bdesc=[type=", 1)[1].split()[0] if "Bdesc=[type=" in line else "?"
                types = f"A {a} x B {b}"
                if "maxWorkspaceSizeinBytes=" in line:
                    limit = int(line.split("maxWorkspaceSizeinBytes=", 1)[1].split()[0].rstrip("]"))
        parts = [f"algo {algo}" if algo else "algo not logged"]
        if types:
            parts.append(types)
        if limit is not None:
            parts.append(f"workspace limit {limit >> 20} MiB" if limit >= 1 << 20 else f"workspace limit {limit} B")
        calls[key] = {"call": ", ".join(parts), "kernels": kernels}
    return calls


def gpucmp_kernels(path):
    """{(provider, key): [kernel names, most time first]} from gemm_sweep's
    --gpucmp_kernels_out file (kernel-mode breakdowns); {} when absent."""
    if not path or not os.path.exists(path):
        return {}
    doc = load(path)
    out = {}
    for entry in (doc or {}).get("breakdowns", []):
        parts = entry["benchmark"].split("/")
        if len(parts) < 4 or parts[0] != "gemm":
            continue
        key = "/".join([parts[0], parts[2], parts[3]])  # gemm/<dtype>/<shape>
        names = [k["name"] for k in sorted(entry["kernels"], key=lambda k: -k.get("total_s", 0)) if k.get("kind") == "kernel"]
        out[(parts[1], key)] = names
    return out


def geomean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


SPARSE_DTYPES = ("tf32", "fp16", "bf16", "fp8_e4m3", "int8")
SPARSE_SQUARES = [f"{n}x{n}x{n}" for n in (1024, 2048, 4096, 8192, 16384)]
SPARSE_LLAMA = [f"{m}x{t}x{k}" for m, k in ((6144, 4096), (4096, 4096), (28672, 4096), (4096, 14336)) for t in (16, 4096)]
SPARSE_DEEPBENCH = ["1760x128x1760", "2560x64x2560", "4096x128x4096", "4096x7000x4096", "5124x9124x2560", "35x8457x2560",
                    "7680x128x2560", "3072x128x1024", "1024x16x500000", "7680x24000x2560", "512x24000x2816"]


def sparse_section(md, out, checks, ours, peer, peer_meta, missing, with_peer=True):
    """2:4 sparse GEMM: gpucmp's sparse rows against its own dense GEMM of the same layout
    (the measured speed-up next to the datasheets' 2x) and against PyTorch's sparse path
    (to_sparse_semi_structured, and cuSPARSELt's own search through torch._cslt_sparse_mm)."""
    md.extend(["## 2:4 sparse GEMM: what sparsity buys, gpucmp and PyTorch", "",
               "Dense FLOPs counted on both sides (2 m n k, as the datasheets' \"with sparsity\" figures count them), so "
               "a 2:4 row twice as fast as its dense row reaches the datasheets' 2x. gpucmp: cuSPARSELt's configurations "
               "searched by the engine (`cusparselt`), its default configuration (`cusparselt_default`, squares), and the "
               "verified dense cuBLASLt GEMM of the same layout. PyTorch: `F.linear` on a `to_sparse_semi_structured` "
               "weight (what a user writes), `torch._cslt_sparse_mm` on cuSPARSELt's own search's choice, and "
               "`torch.matmul` dense. Ratio = PyTorch sparse time / gpucmp sparse time.", "",
               "| dtype | m x n x k | gpucmp sparse TFLOP/s | gpucmp dense TFLOP/s | gpucmp sparse / dense | "
               "PyTorch sparse TFLOP/s | PyTorch searched TFLOP/s | PyTorch dense TFLOP/s | PyTorch sparse / dense | ratio | "
               "gpucmp algorithm |", "|---|---|---|---|---|---|---|---|---|---|---|"])
    rows = []
    for dtype in SPARSE_DTYPES:
        for shape in SPARSE_SQUARES + SPARSE_LLAMA + SPARSE_DEEPBENCH:
            m, n, k = (int(x) for x in shape.split("x"))
            flops = 2.0 * m * n * k
            sparse = ours.get(("cusparselt", f"sparse_gemm/{dtype}/{shape}", "graph"))
            dense = ours.get(("cublaslt", f"gemm/{dtype}/{shape}_tn", "graph"))
            t_sparse = peer.get(f"sparse_gemm/{dtype}/{shape}")
            t_searched = peer.get(f"sparse_gemm_searched/{dtype}/{shape}")
            t_dense = peer.get(f"gemm/{dtype}/{shape}_tn")
            if sparse is None and dense is None:
                continue  # not run (a filtered sweep), or unsupported on this GPU: the sweep's own output says which
            tf = lambda seconds: flops / seconds * 1e-12
            cell = lambda r, seconds: "–" if r is None else f"{tf(seconds(r)):.1f}"
            speedup = dense[0] / sparse[0] if sparse and dense else None
            t_speedup = t_dense["seconds"] / t_sparse["seconds"] if t_sparse and t_dense else None
            ratio = t_sparse["seconds"] / sparse[0] if t_sparse and sparse else None
            refused = (peer_meta.get("refused") or {}).get(f"sparse_gemm/{dtype}/{shape}")
            if not with_peer:
                refused = "not run"
            md.append(f"| {dtype} | {shape} | {cell(sparse, lambda r: r[0])} | {cell(dense, lambda r: r[0])} | "
                      f"{'–' if speedup is None else f'{speedup:.2f}x'} | "
                      f"{cell(t_sparse, lambda r: r['seconds']) if not refused else ('not run' if refused == 'not run' else 'refused')} | "
                      f"{cell(t_searched, lambda r: r['seconds'])} | {cell(t_dense, lambda r: r['seconds'])} | "
                      f"{'–' if t_speedup is None else f'{t_speedup:.2f}x'} | {'–' if ratio is None else f'{ratio:.3f}'} | "
                      f"{sparse[1].split(';')[0] if sparse else '–'} |")
            rows.append({"key": f"{dtype}/{shape}", "dtype": dtype, "shape": shape, "gpucmp_sparse_s": sparse[0] if sparse else None,
                         "gpucmp_dense_s": dense[0] if dense else None, "gpucmp_speedup": speedup,
                         "torch_sparse_s": t_sparse["seconds"] if t_sparse else None,
                         "torch_searched_s": t_searched["seconds"] if t_searched else None,
                         "torch_dense_s": t_dense["seconds"] if t_dense else None, "torch_speedup": t_speedup,
                         "ratio": ratio, "torch_refused": refused})
            if shape == "8192x8192x8192":
                if sparse is None or dense is None:
                    missing.append(f"sparse_gemm/{dtype}/{shape}")
                else:
                    checks.append((f"2:4 sparse {dtype} 8192^3: >= 1.50 x gpucmp's dense", speedup >= 1.5, speedup))
                if dtype == "fp16" and with_peer:
                    if ratio is None:
                        missing.append(f"PyTorch sparse_gemm/{dtype}/{shape}")
                    else:
                        checks.append((f"2:4 sparse {dtype} 8192^3: >= 1.00 x PyTorch's sparse path", ratio >= 1.0, ratio))
    refused = peer_meta.get("refused") or {}
    if refused:
        md.extend(["", "PyTorch refused: " + "; ".join(f"`{key}`: {why}" for key, why in sorted(refused.items()))])
    md.append("")
    out["sections"]["2:4 sparse GEMM"] = {"rows": rows}


def write_outputs(args, md, out, checks, missing):
    """The table (--out-md), the rows with the checks and what was missing (--out-json), and
    each check on stdout."""
    out["checks"] = [{"check": n, "passed": ok, "value": v} for n, ok, v in checks]
    out["missing"] = missing
    out["skipped_inputs"] = SKIPPED
    with open(args.out_md, "w") as f:
        f.write("\n".join(md) + "\n")
    with open(args.out_json, "w") as f:
        json.dump(out, f, indent=1)
    for name, ok, value in checks:
        print(f"{'PASS' if ok else 'FAIL'}: {name} (measured {value:.3f})")


def sparse_only(args, ours):
    """The 2:4 table from gpucmp's rows alone (no PyTorch run): sparse against dense, the
    datasheets' 2x beside it; the PyTorch columns say it did not run."""
    md = [f"# gpucmp's 2:4 sparse GEMM against its dense GEMM ({CONTEXT.get('gpu_name', 'GPU')})", "",
          "gpucmp's rows only: PyTorch did not run here. Graph mode, each row's own stopping rule. Generated by "
          "scripts/peers/compare-ops.py --parts sparse without --torch.", "",
          "gpucmp ran with " + " and ".join(f"{name} {CONTEXT[key]}" for name, key in
                                             (("cuBLASLt", "cublasLt_version"), ("cuSPARSELt", "cusparseLt_version"))
                                             if key in CONTEXT) + ".", ""]
    out = {"meta": {"gpu": CONTEXT.get("gpu_name"), "torch": None}, "sections": {}}
    checks, missing = [], []
    sparse_section(md, out, checks, ours, {}, {}, missing, with_peer=False)
    md.extend(["## Acceptance checks", ""] + [f"- {'PASS' if ok else 'FAIL'}: {name} (measured {value:.3f})"
                                              for name, ok, value in checks])
    if missing:
        md.extend(["", f"Missing rows: {', '.join(missing)}"])
    write_outputs(args, md, out, checks, missing)
    return 1 if missing or SKIPPED else 0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gpucmp", nargs="+", required=True)
    p.add_argument("--torch", nargs="+",
                   help="torch_ops.py's files; without them only gpucmp's own comparisons are made (--parts sparse)")
    p.add_argument("--out-md", required=True)
    p.add_argument("--out-json", required=True)
    p.add_argument("--torch-calls", help="torch_gemm_calls.py's output: PyTorch's cuBLASLt call per 8192^3 GEMM")
    p.add_argument("--gpucmp-kernels", help="gemm_sweep's --gpucmp_kernels_out file: the kernels gpucmp's rows ran")
    p.add_argument("--parts", default="gemm,deepbench,conv,copy",  # and sparse, when asked for
                   help="the parts that ran (run-ops-comparison.sh's GPUCMP_COMPARISON_PARTS); the others are left out")
    args = p.parse_args()
    parts = set(args.parts.split(","))
    ours = gpucmp_rows(args.gpucmp)
    if not args.torch:
        if parts != {"sparse"}:
            print("compare-ops: without --torch only --parts sparse compares (gpucmp's sparse rows against its dense ones)",
                  file=sys.stderr)
            return 2
        return sparse_only(args, ours)
    peer, peer_meta, peer_rounds = torch_rows(args.torch)
    if peer_meta is None:
        print("compare-ops: none of the PyTorch files could be read: " + ", ".join(args.torch), file=sys.stderr)
        return 2
    peer_doc = {"meta": peer_meta}

    md = [f"# gpucmp operations vs PyTorch ({peer_doc['meta']['gpu']})", "",
          f"PyTorch {peer_doc['meta']['torch']} (CUDA {peer_doc['meta']['cuda']}, cuDNN {peer_doc['meta']['cudnn']}): "
          f"CUDA-graph replay of {peer_doc['meta']['calls_per_replay']} calls per event pair "
          f"({peer_doc['meta'].get('large_gemm_calls_per_replay', 10)} for 8192^3), median of "
          f"at least {peer_doc['meta']['repetitions']} replays and 0.1 s of GPU time after 20 ms of warm-up. "
          "gpucmp: graph mode with the same launches per graph (`--gpucmp_batch`; per-launch median, at least 0.1 s of "
          "GPU time after 20 ms of warm-up). "
          + (f"Before each 8192^3 row both sides idle {peer_doc['meta']['large_gemm_cooldown_s']:g} s once the GPU has "
             "finished (`--gpucmp_cooldown_s`, `--large-gemm-cooldown`), so neither inherits the power state of what ran "
             "before. " if peer_doc["meta"].get("large_gemm_cooldown_s") else "")
          + (f"Both sides then warm each 8192^3 row up for {peer_doc['meta']['large_gemm_warmup_s']:g} s "
             f"and time a fixed window of {peer_doc['meta']['large_gemm_window_s']:g} s of GPU time, at least 10 samples "
             "(`--gpucmp_warmup_s`/`--gpucmp_window_s`, `--large-gemm-warmup`/`--large-gemm-window`): under a power cap "
             "a GEMM slows for seconds after the load begins, so both must time the same stretch of it. "
             if peer_doc["meta"].get("large_gemm_window_s") else "")
          + "Ratio = PyTorch time / gpucmp time (> 1: gpucmp faster). Generated by scripts/peers/compare-ops.py.", "",
          "gpucmp ran with " + " and ".join(f"{name} {CONTEXT[key]}" for name, key in
                                             (("cuBLASLt", "cublasLt_version"), ("cuDNN", "cudnn_version"),
                                              ("cuSPARSELt", "cusparseLt_version")) if key in CONTEXT)
          + " (run-ops-comparison.sh loads the builds PyTorch loads unless GPUCMP_SAME_LIBRARIES=0)."
          + (f" Each side ran {peer_rounds} rounds, interleaved (gpucmp, PyTorch, PyTorch, gpucmp, ...); every time is"
             " the median over the rounds." if peer_rounds > 1 else "")
          + ("" if parts >= {"gemm", "deepbench", "conv", "copy"} else f" Parts run: {', '.join(sorted(parts))} (the others left out)."),
          ""]
    out = {"meta": peer_doc["meta"], "sections": {}}
    missing = []
    checks = []

    def section(title, keys, rate, threshold, check_name, provider):
        md.extend([f"## {title}", "", f"| shape | gpucmp µs | PyTorch µs | gpucmp {rate} | PyTorch {rate} | ratio | gpucmp algorithm |",
                   "|---|---|---|---|---|---|---|"])
        ratios, rows = [], []
        for key in keys:
            mine = ours.get((provider, key, "graph"))
            theirs = peer.get(key)
            if mine is None or theirs is None:
                missing.append(key)
                mine_us = "–" if mine is None else "%.1f" % (mine[0] * 1e6)
                theirs_us = "–" if theirs is None else "%.1f" % (theirs["seconds"] * 1e6)
                md.append(f"| {key} | {mine_us} | {theirs_us} | | | missing | |")
                continue
            work = theirs.get("flops", 0)
            scale = 1e-12
            ratio = theirs["seconds"] / mine[0]
            ratios.append(ratio)
            algo = mine[1].split(";")[0]
            md.append(f"| {key.split('/', 1)[1]} | {mine[0]*1e6:.1f} | {theirs['seconds']*1e6:.1f} | "
                      f"{work / mine[0] * scale:.1f} | {work / theirs['seconds'] * scale:.1f} | {ratio:.3f} | {algo} |")
            rows.append({"key": key, "gpucmp_s": mine[0], "torch_s": theirs["seconds"], "ratio": ratio, "algorithm": algo})
        g = geomean(ratios)
        md.extend(["", f"Geometric mean of the ratios: **{g:.3f}** over {len(ratios)} rows.", ""])
        out["sections"][title] = {"rows": rows, "geomean": g}
        if check_name:
            passed = all(r >= threshold for r in ratios) if check_name.startswith("each") else g >= threshold
            checks.append((f"{title}: {check_name} >= {threshold:.2f}", passed, min(ratios) if check_name.startswith("each") and ratios else g))
        return ratios

    large_keys = ([f"gemm/{t}/8192x8192x8192" for t in ("fp32", "tf32", "fp16", "bf16")] +
                  [f"gemm/{t}/8192x8192x8192_tn" for t in ("fp8_e4m3", "fp8_e5m2", "int8")])
    if "gemm" in parts:
        section("GEMM 8192^3", large_keys, "TFLOP/s", 1.0, "each ratio", "cublaslt")
        # Control: gpucmp running the heuristic's first choice, PyTorch's way of choosing.
        logged = torch_calls(args.torch_calls)
        table = ["## GEMM 8192^3: the heuristic's first choice, run by gpucmp (control)", "",
                 "PyTorch runs cuBLASLt's heuristic first choice; gpucmp's `cublaslt_heuristic` rows run it too, "
                 "without a search (workspace limit 32 MiB). Where the algorithm ids agree both sides run the same "
                 "kernel, and the ratio shows the run's noise and any difference of the harnesses; the last ratio is "
                 "what gpucmp's search gains over its own heuristic choice. PyTorch's call is from cuBLAS/cuBLASLt's "
                 "own API log (torch_gemm_calls.py).", "",
                 "| shape | gpucmp heuristic µs | PyTorch µs | ratio | gpucmp search µs | heuristic / search | "
                 "gpucmp heuristic algorithm | PyTorch's cuBLASLt call |", "|---|---|---|---|---|---|---|---|"]
        control = []
        for key in large_keys:
            h = ours.get(("cublaslt_heuristic", key, "graph"))
            m = ours.get(("cublaslt", key, "graph"))
            theirs = peer.get(key)
            if h is None or theirs is None:
                continue
            ratio = theirs["seconds"] / h[0]
            gain = f"{h[0] / m[0]:.3f}" if m else "–"
            search_us = f"{m[0]*1e6:.1f}" if m else "–"
            table.append(f"| {key.split('/', 1)[1]} | {h[0]*1e6:.1f} | {theirs['seconds']*1e6:.1f} | {ratio:.3f} | {search_us} | "
                         f"{gain} | {h[1].split(';')[0]} | {logged.get(key, {}).get('call', 'not logged')} |")
            control.append({"key": key, "gpucmp_heuristic_s": h[0], "torch_s": theirs["seconds"], "ratio": ratio,
                            "gpucmp_search_s": m[0] if m else None, "algorithm": h[1].split(";")[0],
                            "torch_call": logged.get(key, {}).get("call")})
        if control:  # runs before the heuristic rows were registered have none
            g = geomean([r["ratio"] for r in control])
            md.extend(table + ["", f"Geometric mean of the ratios: **{g:.3f}** over {len(control)} rows.", ""])
            out["sections"]["GEMM 8192^3 heuristic control"] = {"rows": control, "geomean": g}
        # Which kernels ran: PyTorch's (profiler) and gpucmp's (kernel mode), by name.
        ran = gpucmp_kernels(args.gpucmp_kernels)
        named = []
        for key in large_keys:
            theirs_k = logged.get(key, {}).get("kernels", [])
            heur_k, search_k = ran.get(("cublaslt_heuristic", key), []), ran.get(("cublaslt", key), [])
            if not theirs_k and not heur_k and not search_k:
                continue
            fmt = lambda names: "<br>".join(f"`{n}`" for n in names) if names else "–"
            same = lambda names: "–" if not names or not theirs_k else ("yes" if names == theirs_k else "no")
            named.append(f"| {key.split('/', 1)[1]} | {fmt(theirs_k)} | {fmt(heur_k)} | {same(heur_k)} | {fmt(search_k)} | "
                         f"{same(search_k)} |")
            out.setdefault("kernels", []).append({"key": key, "torch": theirs_k, "gpucmp_heuristic": heur_k,
                                                  "gpucmp_search": search_k})
        if named:
            md.extend(["## GEMM 8192^3: the kernels each side ran", "",
                       "PyTorch's from torch.profiler (torch_gemm_calls.py), gpucmp's from its kernel mode "
                       "(`--gpucmp_kernels_out`; the search runs again in that process and may choose differently "
                       "than in the timed rounds).", "",
                       "| shape | PyTorch | gpucmp heuristic | same as PyTorch | gpucmp search | same as PyTorch |",
                       "|---|---|---|---|---|---|"] + named + [""])
    deep = ["1760x128x1760", "2560x64x2560", "4096x128x4096", "4096x7000x4096", "5124x9124x2560_tn", "35x8457x2560",
            "7680x128x2560", "3072x128x1024_tn", "1024x16x500000", "7680x24000x2560", "512x24000x2816"]
    if "deepbench" in parts:
        for t in ("fp16", "tf32"):
            section(f"DeepBench GEMMs {t.upper()}", [f"gemm/{t}/{s}" for s in deep], "TFLOP/s", 1.05, "geomean", "cublaslt")
    resnet = [(3, 64, 7, 2, 3, 224), (64, 64, 1, 1, 0, 56), (64, 64, 3, 1, 1, 56), (64, 256, 1, 1, 0, 56),
              (256, 64, 1, 1, 0, 56), (256, 128, 1, 1, 0, 56), (128, 128, 3, 2, 1, 56), (128, 512, 1, 1, 0, 28),
              (256, 512, 1, 2, 0, 56), (512, 128, 1, 1, 0, 28), (128, 128, 3, 1, 1, 28), (512, 256, 1, 1, 0, 28),
              (256, 256, 3, 2, 1, 28), (256, 1024, 1, 1, 0, 14), (512, 1024, 1, 2, 0, 28), (1024, 256, 1, 1, 0, 14),
              (256, 256, 3, 1, 1, 14), (1024, 512, 1, 1, 0, 14), (512, 512, 3, 2, 1, 14), (512, 2048, 1, 1, 0, 7),
              (1024, 2048, 1, 2, 0, 14), (2048, 512, 1, 1, 0, 7), (512, 512, 3, 1, 1, 7)]
    if "conv" in parts:
        all_conv = []
        for batch in (32, 256):
            keys = [f"conv_fwd/fp16_nhwc/n{batch}_c{c}_h{h}_w{h}_k{k}_r{r}_s{r}_p{pad}_u{s}" for c, k, r, s, pad, h in resnet]
            all_conv += section(f"ResNet-50 convolutions, FP16 NHWC forward, batch {batch}", keys, "TFLOP/s", 0, None, "cudnn")
        g = geomean(all_conv)
        md.extend([f"Geometric mean over both batches: **{g:.3f}** ({len(all_conv)} rows).", ""])
        checks.append(("ResNet-50 convolutions FP16 NHWC forward: geomean >= 1.00", g >= 1.0, g))

    if "sparse" in parts:
        sparse_section(md, out, checks, ours, peer, peer_meta, missing)

    # The timed search against the heuristic, gpucmp's own rows.
    if "deepbench" in parts:
        md.extend(["## Timed algorithm search vs cuBLASLt heuristic (gpucmp, DeepBench shapes)", "",
                   "| shape | heuristic µs | search µs | speed-up |", "|---|---|---|---|"])
        gains = []
        for t in ("fp16", "tf32"):
            for s in deep:
                h = ours.get(("cublaslt_heuristic", f"gemm/{t}/{s}", "graph"))
                m = ours.get(("cublaslt", f"gemm/{t}/{s}", "graph"))
                if h and m:
                    gains.append(h[0] / m[0])
                    md.append(f"| {t} {s} | {h[0]*1e6:.1f} | {m[0]*1e6:.1f} | {h[0]/m[0]:.3f} |")
        md.extend(["", f"Geometric mean: {geomean(gains):.3f}.", ""])

    # cuDNN's backend engines against its legacy API, gpucmp's own rows.
    if "conv" in parts:
        md.extend(["## cuDNN backend engine search vs legacy algorithm search (gpucmp, FP16 NHWC forward)", "",
                   "The default search (`cudnn`) times both lists; these rows restrict it to one API.", "",
                   "| shape | legacy µs | backend µs | speed-up | legacy algorithm | backend engine |", "|---|---|---|---|---|---|"])
        legacy_gains = []
        for batch in (32, 256):
            for c, k, r, s_, pad, h in resnet:
                key = f"conv_fwd/fp16_nhwc/n{batch}_c{c}_h{h}_w{h}_k{k}_r{r}_s{r}_p{pad}_u{s_}"
                lg = ours.get(("cudnn_legacy", key, "graph"))
                bk = ours.get(("cudnn_backend", key, "graph"))
                if lg and bk:
                    legacy_gains.append(lg[0] / bk[0])
                    md.append(f"| {key.split('/', 2)[2]} | {lg[0]*1e6:.1f} | {bk[0]*1e6:.1f} | {lg[0]/bk[0]:.3f} | "
                              f"{lg[1].split(';')[0]} | {bk[1].split(';')[0]} |")
        md.extend(["", f"Geometric mean: {geomean(legacy_gains):.3f}.", ""])

    # Device copy kernel against cudaMemcpyAsync (hot mode; bytes read + written).
    if "copy" in parts:
        md.extend(["## Device copy kernel vs cudaMemcpyAsync D2D (hot mode, bytes read + written)", "",
                   "| bytes per buffer | kernel GB/s | cudaMemcpyAsync GB/s | kernel / memcpy | PyTorch copy_ GB/s (graph) | kernel launch |",
                   "|---|---|---|---|---|---|"])
        for size in (1 << 30, 4 << 30):
            k = ours.get(("kernel", f"copy/none/{size}", "hot"))
            m = ours.get(("cudaMemcpyAsync_d2d", f"copy/none/{size}", "hot"))
            t = peer.get(f"copy/d2d_torch/{size}")
            if not k or not m:
                missing.append(f"copy {size}")
                continue
            kb, mb = 2 * size / k[0] / 1e9, 2 * size / m[0] / 1e9
            tb = f"{2 * size / t['seconds'] / 1e9:.0f}" if t else "–"
            md.append(f"| {size} | {kb:.0f} | {mb:.0f} | {kb/mb:.3f} | {tb} | {k[1].split(';')[0]} |")
            if size >= 4 << 30:
                checks.append((f"device copy >= 0.98 x cudaMemcpyAsync at {size >> 30} GiB", kb / mb >= 0.98, kb / mb))
        md.append("")

    # The whole bandwidth sweep (gpucmp only).
    sizes = sorted({int(k.split("/")[-1]) for (prov, k, mode) in ours if k.startswith(("copy/", "triad/"))})
    ops = [("kernel", "copy"), ("kernel", "triad"), ("cudaMemcpyAsync_d2d", "copy"), ("cudaMemcpyAsync_h2d", "copy"),
           ("cudaMemcpyAsync_d2h", "copy")]
    if sizes:
        md.extend(["## Bandwidth sweep (gpucmp, GB/s, hot / graph mode)", "",
                   "Device operations count bytes read + written; host<->device copies count the bytes that cross the bus.", "",
                   "| bytes per buffer | " + " | ".join(f"{op} {prov}" for prov, op in ops) + " |",
                   "|---|" + "---|" * len(ops)])
        for size in sizes:
            cells = []
            for prov, op in ops:
                hot, graph = ours.get((prov, f"{op}/none/{size}", "hot")), ours.get((prov, f"{op}/none/{size}", "graph"))
                factor = 3 if op == "triad" else (1 if "h2d" in prov or "d2h" in prov else 2)
                fmt = lambda r: "–" if r is None else "%.0f" % (factor * size / r[0] / 1e9)
                cells.append(f"{fmt(hot)} / {fmt(graph)}")
            md.append(f"| {size} | " + " | ".join(cells) + " |")
        md.append("")

    md.extend(["## Acceptance checks", ""])
    for name, passed, value in checks:
        md.append(f"- {'PASS' if passed else 'FAIL'}: {name} (measured {value:.3f})")
    if missing:
        md.extend(["", f"Missing rows: {', '.join(missing)}"])
    if SKIPPED:
        md.extend(["", f"Unreadable inputs, left out: {', '.join(os.path.basename(p_) for p_ in SKIPPED)}"])
    # Both sides must time the same window of the 8192^3 rows, or their ratio compares two
    # stretches of a drifting GPU rather than two harnesses.
    peer_window = float(peer_doc["meta"].get("large_gemm_window_s", 0))
    unlike = "gemm" in parts and bool(LARGE_GEMM_WINDOWS) and LARGE_GEMM_WINDOWS != {peer_window}
    if unlike:
        windows = ", ".join(f"{w:g} s" if w else "none (noise rule)" for w in sorted(LARGE_GEMM_WINDOWS))
        note = (f"8192^3 rows timed unlike: gpucmp's window {windows}, PyTorch's "
                f"{f'{peer_window:g} s' if peer_window else 'none (repetitions and 0.1 s)'}")
        md.extend(["", note])
        print(f"compare-ops: {note}", file=sys.stderr)
    write_outputs(args, md, out, checks, missing)
    return 1 if missing or SKIPPED or unlike else 0


if __name__ == "__main__":
    sys.exit(main())
