#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: gpucmp contributors
"""Host test of scripts/multigpu/project_cards.py on a synthetic run: the measured GPU's
one-GPU rate and all-reduce busbw, a projection CSV for the others, and the table's numbers
worked out by hand (NVLink GPUs scaled by NVLink bandwidth, PCIe-only GPUs at the stated
PCIe assumption, no overlap and full overlap), plus the refusals."""
import csv
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from typed_fixture import typed  # noqa: E402

script, repo_root = sys.argv[1], sys.argv[2]
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)


GRADIENT_BYTES = 23_454_912 * 2 + 2_102_120 * 4  # 55.3 MB

with tempfile.TemporaryDirectory() as out:
    # Missing inputs are refused by name.
    missing = subprocess.run([sys.executable, script, repo_root, out], capture_output=True, text=True)
    check(missing.returncode != 0 and "gpucmp_training_dp.json" in missing.stderr, f"missing inputs refused: {missing.stderr}")
    # H200: 8,000 img/s on one GPU (32 ms at 256); all-reduce busbw 360 GB/s at 64 MiB and 100 at 8 KiB over 2 GPUs.
    with open(os.path.join(out, "gpucmp_training_dp.json"), "w") as f:
        json.dump(typed([{"name": "train/resnet50/amp_fp16/bs256/graph/iterations:1/manual_time", "real_time": 32.0,
                          "time_unit": "ms", "items": 256}], {"gpu_name": "NVIDIA H200"}), f)
    entries = []
    for size, busbw in ((8192, 100.0), (67108864, 360.0)):
        entries.append({"name": f"all_reduce/nccl/fp32/{size}/out_of_place/graph/iterations:1/manual_time", "real_time": 1.0,
                        "time_unit": "ms", "bytes_read": size, "ranks": 2, "busbw_GBps": busbw})
    with open(os.path.join(out, "gpucmp_collectives.json"), "w") as f:
        json.dump(typed(entries), f)
    # gpucmp-report's projection: A100 at 64 ms, L40S at 80 ms per step; nothing for L20 or H100.
    with open(os.path.join(out, "projection.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["benchmark", "gpu", "gpu_key", "kind", "seconds", "rate", "rate_unit", "speedup", "watts", "usd_per_hour", "note"])
        w.writerow(["train/resnet50/amp_fp16/bs256/graph", "A100", "a100_80gb_sxm", "projected", 0.064, "", "", "", "", "", ""])
        w.writerow(["train/resnet50/amp_fp16/bs256/graph", "L40S", "l40s", "projected", 0.080, "", "", "", "", "", ""])
    result = subprocess.run([sys.executable, script, repo_root, out], capture_output=True, text=True)
    check(result.returncode == 0, f"projection runs: {result.stderr[-400:]}")
    doc = json.load(open(os.path.join(out, "cards_projection.json")))
    rows = {r["key"]: r for r in doc["rows"]}
    check(doc["measured_allreduce"] == {"bytes": 67108864, "busbw_GBps": 360.0, "ranks": 2}, f"the size nearest the gradients {doc}")
    h200 = rows["h200_sxm"]
    allreduce = GRADIENT_BYTES * 2 * 7 / 8 / 360e9
    check(h200["allreduce_ms"] == round(allreduce * 1e3, 2), f"H200 all-reduce {h200}")
    check(h200["no_overlap_images_per_s"] == round(8 * 256 / (0.032 + allreduce)), f"H200 8 cards {h200}")
    check(h200["full_overlap_images_per_s"] == 8 * 8000, f"H200 full overlap {h200}")
    a100 = rows["a100_80gb_sxm"]
    check(a100["busbw_GBps"] == 240.0 and "NVLink" in a100["interconnect"], f"A100 busbw 360 x 600/900 {a100}")
    check(a100["one_gpu_images_per_s"] == 4000 and "projected" in a100["one_gpu_source"], f"A100 one GPU {a100}")
    l40s = rows["l40s"]
    check(l40s["busbw_GBps"] == round(31.5 * 0.8, 1) and "PCIe gen4" in l40s["interconnect"], f"L40S over PCIe {l40s}")
    l40s_ar = GRADIENT_BYTES * 2 * 7 / 8 / (31.5 * 0.8e9)
    check(l40s["no_overlap_efficiency"] == round(0.080 / (0.080 + l40s_ar), 3), f"L40S scaling {l40s}")
    check(rows["l20"]["one_gpu_images_per_s"] is None and "no_overlap_images_per_s" not in rows["l20"], "L20 without a projection")
    table = open(os.path.join(out, "cards_projection.md")).read()
    check("| NVIDIA L20 (48GB PCIe) | PCIe gen4 only | – (missing: no projection)" in table, f"L20's row says it is missing:\n{table}")
    bad = subprocess.run([sys.executable, script, repo_root, out, "--gpus", "a200"], capture_output=True, text=True)
    check(bad.returncode != 0 and "unknown GPU 'a200'" in bad.stderr, f"an unknown GPU is named: {bad.stderr}")

if failures:
    print("cards projection: " + str(len(failures)) + " check(s) failed:\n  " + "\n  ".join(failures))
    sys.exit(1)
print("cards projection: all checks passed")
