#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: gpucmp contributors
"""Host tests of the training and multi-GPU acceptance scripts on synthetic runs:
lab/acceptance/training.py (images/s from the typed rows' items and seconds, the ratios
against PyTorch's rows and their targets, the reach row, the verification rows against each
run's bounds, the user-network and largest-batch rows, the seed-style table's projections
from gpucmp-report's CSV, the median of alternating gpucmp / PyTorch pairs, missing inputs
failing) and lab/acceptance/multigpu.py (busbw
from the declared bytes, the time and the rank count, against torch.distributed's)."""
import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from typed_fixture import typed  # noqa: E402

training_script, multigpu_script, repo_root = sys.argv[1], sys.argv[2], sys.argv[3]
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)


def rows_of(out):
    return {r["row"]: r for r in json.load(open(os.path.join(out, "acceptance.json")))}


def find(rows, start):
    matches = [r for name, r in rows.items() if name.startswith(start)]
    check(len(matches) == 1, f"one row starts with {start!r}, found {len(matches)}")
    return matches[0] if matches else {"measured": None, "pass": None}


with tempfile.TemporaryDirectory() as d:
    # A repository root with the host tests the script looks for and a docs page.
    root = os.path.join(d, "root")
    for rel in ("tests/unit/training_test.cpp", "tests/unit/training_memory_test.cpp", "tests/unit/reference_layers_test.cpp"):
        os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
        shutil.copy(os.path.join(repo_root, rel), os.path.join(root, rel))
    os.makedirs(os.path.join(root, "docs"))
    out = os.path.join(d, "out")
    os.makedirs(out)

    # gpucmp: AMP FP16 graph at 256 images in 30 ms (8,533 img/s), eager 10 % slower; BF16 and
    # TF32 slower still; all three batches.
    speed = {"amp_fp16": 8533.0, "bf16": 6000.0, "tf32": 3900.0}
    entries = []
    for p, rate in speed.items():
        for b in (64, 128, 256):
            for mode, factor in (("graph", 1.0), ("eager", 0.9)):
                seconds = b / (rate * factor * (0.9 if b == 64 else 1.0))
                entries.append({"name": f"train/resnet50/{p}/bs{b}/{mode}/iterations:1/manual_time", "real_time": seconds * 1e3,
                                "time_unit": "ms", "items": b, "flops": 24.3e9 * b})
        with open(os.path.join(out, f"gpucmp_training_{p}.json"), "w") as f:
            json.dump(typed([e for e in entries if f"/{p}/" in e["name"]]), f)
    # PyTorch: the reference's rates (h200-peers.md).
    torch_rates = {("amp_fp16", "eager"): {64: 2949, 128: 5152, 256: 5764}, ("bf16", "eager"): {64: 3027, 128: 4289, 256: 4670},
                   ("bf16", "graph"): {64: 3945, 128: 4394, 256: 4742}, ("tf32", "eager"): {64: 2702, 128: 3008, 256: 3166}}
    with open(os.path.join(out, "torch_training.json"), "w") as f:
        json.dump({"rows": [{"key": f"train/resnet50/{p}/bs{b}/{m}", "images_per_s": v}
                            for (p, m), by in torch_rates.items() for b, v in by.items()]}, f)
    # Verification: FP32 inside its bounds, AMP FP16's loss curve outside, TF32 and BF16 missing;
    # at random init FP32 as accurate as PyTorch, AMP FP16 with two tensors less accurate.
    for p, curve in (("fp32", 5e-4), ("amp_fp16", 0.5)):
        bounds = {"gradient_and_weight": 1e-4 if p == "fp32" else 5e-2, "loss_curve": 1e-3 if p == "fp32" else 2e-2,
                  "as_torch_factor": 1.5}
        with open(os.path.join(out, f"verify_{p}_conditioned.json"), "w") as f:
            json.dump({"gpucmp_vs_fp64": {"gradient_max": 2e-5, "weights_max": 3e-5, "loss_curve_max": curve}, "bounds": bounds}, f)
        with open(os.path.join(out, f"verify_{p}.json"), "w") as f:
            json.dump({"gpucmp_vs_fp64": {"gradient_max": 2e-2, "weights_max": 2e-2, "loss_curve_max": 3.0}, "bounds": bounds,
                       "less_accurate_than_torch": [] if p == "fp32" else ["conv1.weight", "fc.bias"]}, f)
    with open(os.path.join(out, "example_losses.json"), "w") as f:
        json.dump({"losses": [2.3, 1.5, 0.9]}, f)
    with open(os.path.join(out, "largest_batch.txt"), "w") as f:
        f.write("train/resnet50/amp_fp16: largest batch (memory plan in 130.2 GiB free, then built): 1408 (built and verified)\n")
    with open(os.path.join(out, "projection.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["benchmark", "gpu", "gpu_key", "kind", "seconds", "rate", "rate_unit", "speedup", "watts", "usd_per_hour", "note"])
        w.writerow(["train/resnet50/amp_fp16/bs256/graph", "A100", "a100_80gb_sxm", "projected", 0.1, "", "", "", "", "", ""])
        w.writerow(["train/resnet50/amp_fp16/bs256/graph", "H200", "h200_sxm", "measured", 0.03, "", "", "", "", "", ""])

    result = subprocess.run([sys.executable, training_script, root, out], capture_output=True, text=True)
    check(result.returncode == 1, f"training acceptance: some rows fail, so exit 1 (got {result.returncode}: {result.stderr[-300:]})")
    rows = rows_of(out)
    amp = find(rows, "AMP FP16 bs256: gpucmp graph / PyTorch AMP eager")
    check(amp["measured"] == round(8533.0 / 5764, 3) and amp["pass"], f"AMP ratio {amp}")
    bf = find(rows, "AMP FP16 bs256: gpucmp graph / PyTorch's best BF16")
    check(bf["measured"] == round(8533.0 / 4742, 3) and bf["pass"], f"AMP vs best BF16 (the graph) {bf}")
    small = find(rows, "AMP FP16 bs64: gpucmp graph / PyTorch AMP eager")
    check(small["measured"] == round(8533.0 * 0.9 / 2949, 3), f"bs64 ratio {small}")
    reach = find(rows, "AMP FP16 bs256 reach")
    check(reach["measured"] == 8533 and reach["pass"], f"reach {reach}")
    tf32 = find(rows, "TF32 bs128: gpucmp graph / PyTorch TF32 eager")
    check(tf32["measured"] == round(3900.0 / 3008, 3) and tf32["pass"], f"TF32 {tf32}")
    bf16 = find(rows, "BF16 bs256: gpucmp graph / PyTorch BF16 CUDA graph")
    check(bf16["measured"] == round(6000.0 / 4742, 3) and bf16["pass"], f"BF16 {bf16}")
    check(find(rows, "fp32, zero-init residual start: worst parameter gradient")["pass"], "FP32 gradients inside their bound")
    check(find(rows, "fp32, zero-init residual start: 50-step loss curve")["pass"], "FP32 loss curve inside its bound")
    check(not find(rows, "amp_fp16, zero-init residual start: 50-step loss curve")["pass"], "AMP FP16's loss curve outside its bound fails")
    check(find(rows, "tf32, zero-init residual start: gradients")["measured"] == "missing", "a missing verification is a missing row")
    fp32 = find(rows, "fp32, random init: gradients and weights after one step no less accurate")
    check(fp32["measured"] == 0 and fp32["pass"], f"FP32 as accurate as PyTorch {fp32}")
    amp = find(rows, "amp_fp16, random init")
    check(amp["measured"] == 2 and not amp["pass"], f"two AMP tensors less accurate than PyTorch fail {amp}")
    check(find(rows, "bf16, random init")["measured"] == "missing", "no BF16 run: missing")
    user = find(rows, "user network")
    check(user["measured"] == round(0.9 / 2.3, 3) and user["pass"], f"user network {user}")
    check(find(rows, "largest AMP FP16 batch")["measured"] == 1408, "largest batch read from the tool's line")
    check(not find(rows, "seed-style training table")["pass"], "the table is not in the docs yet: the row fails")
    check(find(rows, "host tests in CI")["pass"], "the host tests are found")
    table = open(os.path.join(out, "training_table.md")).read()
    check("| H200 | measured" in table and "8,533" in table, "the H200 row is measured")
    check("| A100 80GB SXM | projected" in table and "2,560" in table and "3,398" in table, "A100 projected from 0.1 s, MLPerf beside")
    check("| L20 | projected" in table and "| – |" in table, "L20 has no projection here and no MLPerf rate")
    # With the table's first row in the docs, the row passes.
    os.makedirs(os.path.join(root, "docs", "results"), exist_ok=True)
    with open(os.path.join(root, "docs", "results", "h200-training.md"), "w") as f:
        f.write(table)
    subprocess.run([sys.executable, training_script, root, out], capture_output=True, text=True)
    check(rows_of(out)[next(n for n in rows_of(out) if n.startswith("seed-style"))]["pass"], "the table in the docs passes")
    side = open(os.path.join(out, "training_vs_pytorch.md")).read()
    check("| amp_fp16 | 256 | 7,680 | 8,533 | 5,764 | – | 1.48× |" in side, f"side-by-side row:\n{side}")

    # Alternating pairs at batch 256: ratios 1.30, 1.42 and 1.45 (median 1.42 passes, the mean
    # 1.39 would not); a fourth pair without PyTorch's side is left out; batch 64 has no pairs
    # and keeps the single run's row.
    for i, (mine, theirs) in enumerate(((7800.0, 6000.0), (8520.0, 6000.0), (8700.0, 6000.0), (8000.0, None)), 1):
        pair = os.path.join(out, "alternate", f"pair{i}")
        os.makedirs(pair)
        with open(os.path.join(pair, "gpucmp_training_amp_fp16.json"), "w") as f:
            json.dump(typed([{"name": "train/resnet50/amp_fp16/bs256/graph/iterations:1/manual_time", "real_time": 256 / mine * 1e3,
                              "time_unit": "ms", "items": 256, "flops": 24.3e9 * 256}]), f)
        if theirs:
            with open(os.path.join(pair, "torch_training_amp_fp16.json"), "w") as f:
                json.dump({"rows": [{"key": "train/resnet50/amp_fp16/bs256/eager", "images_per_s": theirs}]}, f)
    subprocess.run([sys.executable, training_script, root, out], capture_output=True, text=True)
    rows = rows_of(out)
    paired = find(rows, "AMP FP16 bs256: gpucmp graph / PyTorch AMP eager")
    check(paired["measured"] == 1.42 and paired["pass"], f"the median pair's ratio {paired}")
    name = next(n for n in rows if n.startswith("AMP FP16 bs256: gpucmp graph / PyTorch AMP eager"))
    check("median of 3 alternating pairs, range 1.300-1.450" in name, f"the row names its pairs and their range: {name}")
    check(find(rows, "AMP FP16 bs64: gpucmp graph / PyTorch AMP eager")["measured"] == round(8533.0 * 0.9 / 2949, 3),
          "a batch without pairs keeps the single run's ratio")
    check(find(rows, "AMP FP16 bs256 reach")["measured"] == 8533, "the reach row stays the throughput run's")
    pairs_md = open(os.path.join(out, "alternating_pairs.md")).read()
    check("| 256 | 2 | 8,520 | 6,000 | 1.420× |" in pairs_md and "| 256 | median | | | **1.420×** |" in pairs_md
          and "| 256 | 4 |" not in pairs_md, f"the pairs' table:\n{pairs_md}")

    # Multi-GPU: 2 ranks; gpucmp's 1 GiB all-reduce in 3.2 ms (busbw = algbw for 2 ranks).
    mg = os.path.join(d, "mg")
    os.makedirs(mg)
    entries = []
    for mode, ms in (("hot", 3.3), ("graph", 3.2)):
        entries.append({"name": f"all_reduce/nccl/fp32/1073741824/out_of_place/{mode}/iterations:1/manual_time",
                        "real_time": ms, "time_unit": "ms", "bytes_read": 1073741824, "ranks": 2,
                        "algbw_GBps": 1073741824 / (ms * 1e-3) / 1e9})
    with open(os.path.join(mg, "gpucmp_collectives.json"), "w") as f:
        json.dump(typed(entries), f)
    with open(os.path.join(mg, "torch_collectives.json"), "w") as f:
        json.dump({"ranks": 2, "rows": [{"key": "all_reduce/nccl/fp32/1073741824/out_of_place", "busbw_GBps": 324.0}]}, f)
    result = subprocess.run([sys.executable, multigpu_script, repo_root, mg], capture_output=True, text=True)
    check(result.returncode == 1, "multi-GPU acceptance: rows are missing, so exit 1")
    rows = rows_of(mg)
    ar = find(rows, "all_reduce busbw at 1024 MiB")
    check(ar["measured"] == round(1073741824 / 3.2e-3 / 1e9 / 324.0, 3) and ar["pass"], f"all-reduce busbw ratio {ar}")
    check(find(rows, "all_gather busbw at 1024 MiB")["measured"] == "missing", "a size gpucmp did not run is missing")
    check(find(rows, "peer copy")["measured"] == "missing", "no P2P run: missing")
    check(find(rows, "mpirun")["measured"] == "missing", "no run under mpirun: missing")
    # Under mpirun: 3.25 ms for the slowest rank, 1.5 % slower than one process's 3.2 ms: within 2 %.
    mpi_entries = [{"name": "all_reduce/nccl/fp32/1073741824/out_of_place/hot/iterations:1/manual_time", "real_time": 3.25,
                    "time_unit": "ms", "bytes_read": 1073741824, "ranks": 2, "algbw_GBps": 1073741824 / 3.25e-3 / 1e9}]
    with open(os.path.join(mg, "gpucmp_collectives_mpi.json"), "w") as f:
        json.dump(typed(mpi_entries), f)
    subprocess.run([sys.executable, multigpu_script, repo_root, mg], capture_output=True, text=True)
    mpi = find(rows_of(mg), "mpirun")
    check(mpi["measured"] == round(3.2 / 3.25, 4) and mpi["pass"], f"mpirun within 2 % {mpi}")
    check(find(rows, "data-parallel")["measured"] == "missing", "no data-parallel run: missing")
    # Data-parallel: one GPU 8,000 img/s, two GPUs 15,600: 97.5 %.
    with open(os.path.join(mg, "gpucmp_training_dp.json"), "w") as f:
        json.dump(typed([{"name": "train/resnet50/amp_fp16/bs256/graph/iterations:1/manual_time", "real_time": 256 / 8000 * 1e3,
                          "time_unit": "ms", "items": 256},
                         {"name": "train/resnet50/amp_fp16/bs256/x2/graph/iterations:1/manual_time", "real_time": 512 / 15600 * 1e3,
                          "time_unit": "ms", "items": 512}]), f)
    subprocess.run([sys.executable, multigpu_script, repo_root, mg], capture_output=True, text=True)
    dp = find(rows_of(mg), "data-parallel")
    check(dp["measured"] == 97.5 and dp["pass"], f"data-parallel efficiency {dp}")
    # Peer copy: 1 GiB in 2.75 ms = 390.4 GB/s against PyTorch's 394: 0.991.
    with open(os.path.join(mg, "gpucmp_p2p.json"), "w") as f:
        json.dump(typed([{"name": "p2p/memcpy_peer/0_1/1073741824/one_way/hot/iterations:1/manual_time", "real_time": 2.75,
                          "time_unit": "ms", "bytes_read": 1073741824}]), f)
    with open(os.path.join(mg, "torch_collectives.json"), "w") as f:
        json.dump({"ranks": 2, "peer_copy_GBps": 394.0,
                   "rows": [{"key": "all_reduce/nccl/fp32/1073741824/out_of_place", "busbw_GBps": 324.0}]}, f)
    subprocess.run([sys.executable, multigpu_script, repo_root, mg], capture_output=True, text=True)
    copy = find(rows_of(mg), "peer copy")
    check(copy["measured"] == round(1073741824 / 2.75e-3 / 1e9 / 394.0, 3) and copy["pass"], f"peer copy {copy}")

if failures:
    print("FAILED:\n" + "\n".join(failures))
    sys.exit(1)
print("training and multi-GPU acceptance scripts: all checks passed")
