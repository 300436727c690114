#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: gpucmp contributors
"""Host test of scripts/peers/compare-ops.py on synthetic inputs: ratios, the median over
interleaved rounds, acceptance lines, missing rows reported (exit status 1), and a truncated
input (a run cut off while writing) left out with a warning while the rest makes the table,
a run of some parts only (--parts), and the 8192^3 control (gpucmp's heuristic choice next to
PyTorch, with PyTorch's call from its cuBLASLt log)."""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from typed_fixture import typed  # noqa: E402

script = sys.argv[1]


def gbench(rows):
    return typed([{"name": name + "/iterations:1/manual_time", "real_time": us, "time_unit": "us",
                   "label": "algo 1; verified"} for name, us in rows],
                 {"cudnn_version": "91900", "cublasLt_version": "130100"})


def torch(rows):
    return {"meta": {"gpu": "Test GPU", "torch": "2.x", "cuda": "13.0", "cudnn": 91900, "calls_per_replay": 20,
                     "repetitions": 20},
            "rows": [{"key": key, "seconds": us * 1e-6, "flops": 2.0 * 8192 ** 3} for key, us in rows]}


with tempfile.TemporaryDirectory() as d:
    def write(name, doc):
        path = os.path.join(d, name)
        with open(path, "w") as f:
            json.dump(doc, f)
        return path

    # Two rounds per side: gpucmp 1000 and 1200 us (median 1100), PyTorch 1210 and 1100 (median 1155).
    g1 = write("g1.json", gbench([("gemm/cublaslt/fp16/8192x8192x8192/graph", 1000.0),
                                  ("copy/kernel/none/4294967296/hot", 2000.0),
                                  ("copy/cudaMemcpyAsync_d2d/none/4294967296/hot", 2010.0)]))
    g2 = write("g2.json", gbench([("gemm/cublaslt/fp16/8192x8192x8192/graph", 1200.0)]))
    t1 = write("t1.json", torch([("gemm/fp16/8192x8192x8192", 1210.0)]))
    t2 = write("t2.json", torch([("gemm/fp16/8192x8192x8192", 1100.0)]))
    md, js = os.path.join(d, "out.md"), os.path.join(d, "out.json")
    run = subprocess.run([sys.executable, script, "--gpucmp", g1, g2, "--torch", t1, t2, "--out-md", md, "--out-json", js],
                         capture_output=True, text=True)
    text = open(md).read()
    out = json.load(open(js))
    failures = []

    def expect(condition, what):
        if not condition:
            failures.append(what)

    expect(run.returncode == 1, f"missing rows must give exit status 1, got {run.returncode}")
    expect("| fp16/8192x8192x8192 | 1100.0 | 1155.0 |" in text, "the FP16 row shows both sides' medians")
    expect("| 1.050 |" in text, "ratio 1155 / 1100 = 1.050")
    expect("Each side ran 2 rounds" in text, "the header says how many rounds")
    row = out["sections"]["GEMM 8192^3"]["rows"][0]
    expect(abs(row["ratio"] - 1.05) < 1e-9, f"JSON ratio {row['ratio']}")
    expect("gemm/fp32/8192x8192x8192" in out["missing"], "absent rows are listed as missing")
    expect(any(c["check"].startswith("device copy >= 0.98") and c["passed"] for c in out["checks"]),
           "copy 2000 us vs memcpy 2010 us passes the 0.98 bar")
    expect("FAIL: GEMM 8192^3" in run.stdout or "PASS: GEMM 8192^3" in run.stdout, "acceptance lines are printed")

    # A second gpucmp round cut off mid-write: left out, named, and the table uses round 1 alone.
    cut = os.path.join(d, "g2_cut.json")
    with open(cut, "w") as f:
        f.write(json.dumps(gbench([("gemm/cublaslt/fp16/8192x8192x8192/graph", 1200.0)]))[:60])
    run = subprocess.run([sys.executable, script, "--gpucmp", g1, cut, "--torch", t1, "--out-md", md, "--out-json", js],
                         capture_output=True, text=True)
    text = open(md).read()
    expect(run.returncode == 1, f"an unreadable input gives exit status 1, got {run.returncode}")
    expect("skipping " + cut in run.stderr, "the unreadable file is named on stderr")
    expect("Unreadable inputs, left out: g2_cut.json" in text, "the table says which input was left out")
    expect("| fp16/8192x8192x8192 | 1000.0 | 1210.0 |" in text, "round 1's rows still make the table")
    expect(json.load(open(js))["skipped_inputs"] == [cut], "the JSON lists the skipped input")
    unreadable_torch = subprocess.run([sys.executable, script, "--gpucmp", g1, "--torch", cut, "--out-md", md,
                                       "--out-json", js], capture_output=True, text=True)
    expect(unreadable_torch.returncode == 2 and "none of the PyTorch files could be read" in unreadable_torch.stderr,
           "no readable PyTorch file is an error naming the files")

    # Only the DeepBench part ran (GPUCMP_COMPARISON_PARTS=deepbench): the other parts are left
    # out, not reported missing, and only the DeepBench checks are made.
    shapes = ["1760x128x1760", "2560x64x2560", "4096x128x4096", "4096x7000x4096", "5124x9124x2560_tn", "35x8457x2560",
              "7680x128x2560", "3072x128x1024_tn", "1024x16x500000", "7680x24000x2560", "512x24000x2816"]
    gd = write("gd.json", gbench([(f"gemm/cublaslt/{t}/{s_}/graph", 10.0) for t in ("fp16", "tf32") for s_ in shapes]))
    td = write("td.json", torch([(f"gemm/{t}/{s_}", 11.0 if t == "fp16" else 10.0) for t in ("fp16", "tf32") for s_ in shapes]))
    run = subprocess.run([sys.executable, script, "--parts", "deepbench", "--gpucmp", gd, "--torch", td, "--out-md", md,
                          "--out-json", js], capture_output=True, text=True)
    text = open(md).read()
    out = json.load(open(js))
    expect(run.returncode == 0, f"a complete partial run exits 0, got {run.returncode}: {run.stderr}")
    expect(out["missing"] == [], f"no rows missing in a DeepBench-only run, got {out['missing']}")
    expect([c["check"] for c in out["checks"]] == ["DeepBench GEMMs FP16: geomean >= 1.05", "DeepBench GEMMs TF32: geomean >= 1.05"],
           f"only the DeepBench checks, got {[c['check'] for c in out['checks']]}")
    expect([c["passed"] for c in out["checks"]] == [True, False], "FP16 1.10 passes, TF32 1.00 does not")
    expect("GEMM 8192^3" not in text and "ResNet-50 convolutions" not in text and "Device copy" not in text,
           "parts that did not run have no sections")
    expect("Parts run: deepbench (the others left out)." in text, "the header names the parts that ran")

    # The 8192^3 control: gpucmp's heuristic rows next to PyTorch, with PyTorch's cuBLASLt call
    # read from its API log (algorithm id, operand types, workspace limit).
    gh = write("gh.json", gbench([("gemm/cublaslt/fp8_e5m2/8192x8192x8192_tn/graph", 880.0),
                                  ("gemm/cublaslt_heuristic/fp8_e5m2/8192x8192x8192_tn/graph", 900.0)]))
    cooled = torch([("gemm/fp8_e5m2/8192x8192x8192_tn", 909.0)])
    cooled["meta"]["large_gemm_cooldown_s"] = 2.0
    th = write("th.json", cooled)
    calls = write("calls.json", {"gemm/fp8_e5m2/8192x8192x8192_tn": [
        "[2026-11-30 10:50:09][cublasLt][917][Api][cublasLtMatmulAlgoGetHeuristic] Adesc=[type=R_8F_E5M2 rows=8192 "
        "cols=8192 ld=8192] Bdesc=[type=R_8F_E4M3 rows=8192 cols=8192 ld=8192] preference=[maxWavesCount=0.0 "
        "maxWorkspaceSizeinBytes=1048576] computeDesc=[computeType=COMPUTE_32F]",
        "[2026-11-30 10:50:09][cublasLt][917][Info][cublasLtMatmulAlgoGetHeuristic]  heuristicResults=[66]",
        "kernel: sm90_gemm_tile256x128_cluster2x1"]})
    kernels = write("kernels.json", {"gpucmp_version": "x", "breakdowns": [
        {"benchmark": "gemm/cublaslt_heuristic/fp8_e5m2/8192x8192x8192_tn/kernel", "kernels": [
            {"name": "[memset]", "kind": "memset", "total_s": 1.0},
            {"name": "sm90_gemm_tile256x128_cluster2x1", "kind": "kernel", "total_s": 0.5}]},
        {"benchmark": "gemm/cublaslt/fp8_e5m2/8192x8192x8192_tn/kernel", "kernels": [
            {"name": "sm90_gemm_tile128x256_cluster1x2", "kind": "kernel", "total_s": 0.5}]}]})
    run = subprocess.run([sys.executable, script, "--parts", "gemm", "--torch-calls", calls, "--gpucmp-kernels", kernels,
                          "--gpucmp", gh, "--torch", th, "--out-md", md, "--out-json", js], capture_output=True, text=True)
    text = open(md).read()
    control = json.load(open(js))["sections"].get("GEMM 8192^3 heuristic control", {}).get("rows", [])
    expect(len(control) == 1 and abs(control[0]["ratio"] - 1.01) < 1e-9, f"control ratio 909 / 900, got {control}")
    expect("| fp8_e5m2/8192x8192x8192_tn | 900.0 | 909.0 | 1.010 | 880.0 | 1.023 |" in text,
           "the control row: heuristic, PyTorch, ratio, search, heuristic / search")
    expect("algo 66, A R_8F_E5M2 x B R_8F_E4M3, workspace limit 1 MiB" in text, "PyTorch's logged call is shown")
    expect("Before each 8192^3 row both sides idle 2 s" in text, "the header names the cool-down")
    expect("| fp8_e5m2/8192x8192x8192_tn | `sm90_gemm_tile256x128_cluster2x1` | `sm90_gemm_tile256x128_cluster2x1` | yes | "
           "`sm90_gemm_tile128x256_cluster1x2` | no |" in text,
           "the kernels table: PyTorch's and gpucmp's kernels by name, memsets left out, same or not")
    no_calls = subprocess.run([sys.executable, script, "--parts", "gemm", "--gpucmp", g1, "--torch", t1, "--out-md", md,
                               "--out-json", js], capture_output=True, text=True)
    expect("heuristic's first choice" not in open(md).read(), "no heuristic rows: no control section")
    expect("Traceback" not in no_calls.stderr, f"no probe file is not an error: {no_calls.stderr}")

    # The 8192^3 rows' fixed window: named in the header when both sides used it; a table of
    # two sides that timed different windows is marked and exits 1.
    large = [f"{d}/8192x8192x8192" for d in ("fp32", "tf32", "fp16", "bf16")] + [
        f"{d}/8192x8192x8192_tn" for d in ("fp8_e4m3", "fp8_e5m2", "int8")]

    def windowed(window_s):
        doc = gbench([(f"gemm/cublaslt/{k}/graph", 1000.0) for k in large])
        for b in doc["benchmarks"]:
            b["window_s"] = window_s
        return doc
    timed = torch([(f"gemm/{k}", 1010.0) for k in large])
    timed["meta"].update(large_gemm_warmup_s=1.0, large_gemm_window_s=1.0)
    tw = write("tw.json", timed)
    for gpucmp_window, status in ((1.0, 0), (0.0, 1)):
        gw = write("gw.json", windowed(gpucmp_window))
        run = subprocess.run([sys.executable, script, "--parts", "gemm", "--gpucmp", gw, "--torch", tw, "--out-md", md,
                              "--out-json", js], capture_output=True, text=True)
        text = open(md).read()
        expect(run.returncode == status, f"gpucmp window {gpucmp_window}: exit status {run.returncode}, want {status}")
        expect("warm each 8192^3 row up for 1 s and time a fixed window of 1 s" in text, "the header names the window")
        unlike = "8192^3 rows timed unlike: gpucmp's window none (noise rule), PyTorch's 1 s" in text
        expect(unlike == (gpucmp_window == 0), f"gpucmp window {gpucmp_window}: unlike-timing note {unlike}")
    # 2:4 sparse GEMM: gpucmp's sparse row against its dense row (the speed-up next to the
    # datasheets' 2x) and PyTorch's sparse path; the 8192^3 bars; what PyTorch refused.
    sparse_g = write("sparse_g.json", gbench([("sparse_gemm/cusparselt/fp16/8192x8192x8192/graph", 600.0),
                                              ("gemm/cublaslt/fp16/8192x8192x8192_tn/graph", 1000.0),
                                              ("sparse_gemm/cusparselt/int8/8192x8192x8192/graph", 400.0),
                                              ("gemm/cublaslt/int8/8192x8192x8192_tn/graph", 500.0)]))
    sparse_t = torch([("sparse_gemm/fp16/8192x8192x8192", 660.0), ("sparse_gemm_searched/fp16/8192x8192x8192", 630.0),
                      ("gemm/fp16/8192x8192x8192_tn", 1100.0)])
    sparse_t["meta"]["refused"] = {"sparse_gemm/int8/8192x8192x8192": "operation not supported"}
    st_path = write("sparse_t.json", sparse_t)
    run = subprocess.run([sys.executable, script, "--parts", "sparse", "--gpucmp", sparse_g, "--torch", st_path,
                          "--out-md", md, "--out-json", js], capture_output=True, text=True)
    text = open(md).read()
    sparse_rows = json.load(open(js))["sections"]["2:4 sparse GEMM"]["rows"]
    fp16 = next(r for r in sparse_rows if r["dtype"] == "fp16")
    expect(abs(fp16["gpucmp_speedup"] - 1000 / 600) < 1e-9 and abs(fp16["torch_speedup"] - 1100 / 660) < 1e-9 and
           abs(fp16["ratio"] - 1.1) < 1e-9, f"fp16 8192^3: speed-ups and ratio, got {fp16}")
    expect("| fp16 | 8192x8192x8192 | 1832.5 | 1099.5 | 1.67x | 1665.9 | 1745.3 | 999.6 | 1.67x | 1.100 | algo 1 |" in text,
           "the fp16 row: TFLOP/s each way, both speed-ups, the ratio")
    expect("| int8 | 8192x8192x8192 | 2748.8 | 2199.0 | 1.25x | refused |" in text, "a refused PyTorch row says so")
    expect("PyTorch refused: `sparse_gemm/int8/8192x8192x8192`: operation not supported" in text, "the refusals listed")
    expect("PASS: 2:4 sparse fp16 8192^3: >= 1.50 x gpucmp's dense (measured 1.667)" in run.stdout, run.stdout)
    expect("PASS: 2:4 sparse fp16 8192^3: >= 1.00 x PyTorch's sparse path (measured 1.100)" in run.stdout, run.stdout)
    expect("FAIL: 2:4 sparse int8 8192^3: >= 1.50 x gpucmp's dense (measured 1.250)" in run.stdout, run.stdout)
    expect("sparse_gemm/bf16/8192x8192x8192" not in text, "a precision that did not run is left out")
    expect(run.returncode == 0, f"every compared row present: exit 0, got {run.returncode}: {run.stderr}")

    # Without a PyTorch run: gpucmp's sparse rows against its dense ones alone (--parts sparse).
    run = subprocess.run([sys.executable, script, "--parts", "sparse", "--gpucmp", sparse_g, "--out-md", md, "--out-json", js],
                         capture_output=True, text=True)
    text = open(md).read()
    expect(run.returncode == 0, f"gpucmp's rows alone: exit 0, got {run.returncode}: {run.stderr}")
    expect("PyTorch did not run here" in text and "| fp16 | 8192x8192x8192 | 1832.5 | 1099.5 | 1.67x | not run |" in text,
           "the table without a peer says so in its header and its PyTorch cells")
    expect("PyTorch's sparse path" not in run.stdout, "no PyTorch bar is checked without PyTorch")
    run = subprocess.run([sys.executable, script, "--gpucmp", sparse_g, "--out-md", md, "--out-json", js], capture_output=True,
                         text=True)
    expect(run.returncode == 2 and "without --torch only --parts sparse" in run.stderr, "other parts need PyTorch's rows")

    if failures:
        print("compare-ops test failed:\n  " + "\n  ".join(failures))
        print(text)
        sys.exit(1)
print("compare-ops: ratios, medians over rounds, missing rows, unreadable inputs, parts and checks as expected")
