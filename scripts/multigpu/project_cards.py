#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: gpucmp contributors
"""The seed-style "8 cards" table: data-parallel ResNet-50 AMP training on N GPUs of each
kind, projected from this run's measurements and the spec database (data/gpus.csv).

Inputs (OUT_DIR of scripts/multigpu/run-collectives-comparison.sh):
  gpucmp_training_dp.json   benchmarks/training --data_parallel: the measured GPU's one-GPU
                            rate (train/resnet50/amp_fp16/bs256/graph)
  projection.csv            gpucmp-report's projections of that row onto the other GPUs
                            (optional: without it only the measured GPU has a one-GPU rate)
  gpucmp_collectives.json   the measured all-reduce (algbw counters; the size nearest the
                            gradients' bytes)
Model, per GPU kind and N cards (stated in the table):
  step(N) = step(1) + all-reduce of the gradients, no overlap (the slowest case), and step(1)
  alone as the full-overlap bound; gpucmp's data-parallel step, which all-reduces in DDP's
  buckets during the backward pass, lies between;
  all-reduce time = gradient bytes x 2 (N-1) / N / busbw.
  busbw: the measured GPU's, scaled by NVLink bandwidth (data/gpus.csv nvlink_gbs) for NVLink
  GPUs on an NVSwitch (busbw stays flat with N there); PCIe-only GPUs at PCIE_EFFICIENCY of one
  direction of an x16 link of their generation (an assumption, marked as one).
Gradient bytes: ResNet-50's 23,454,912 filter weights in FP16 and 2,102,120 other parameters
in FP32 (training/training_memory.hpp counts the same 25,557,032).
Writes OUT_DIR/cards_projection.md and .json.
Usage: project_cards.py REPO_ROOT OUT_DIR [--cards 8] [--gpus a100_80gb_sxm,l20,l40s,h100_sxm]
"""
import argparse
import csv
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import gpucmp_results  # noqa: E402

GRADIENT_BYTES = 23_454_912 * 2 + 2_102_120 * 4
ROW = "train/resnet50/amp_fp16/bs256/graph"
BATCH = 256
PCIE_X16_GBPS = {3: 15.75, 4: 31.5, 5: 63.0}  # one direction, GB/s
PCIE_EFFICIENCY = 0.8


def load_gpus(root):
    with open(os.path.join(root, "data", "gpus.csv"), newline="") as f:
        return {r["key"]: r for r in csv.DictReader(f)}


def measured_rate(path):
    """(GPU name from the context, images/s of ROW) from typed rows; None when absent."""
    result = gpucmp_results.load(path)
    for bench, runs in result.by_benchmark().items():
        ok = sorted(r.seconds for r in runs if r.ok)
        if bench == ROW and ok and runs[0].items:
            return result.context.get("gpu_name", ""), runs[0].items / ok[len(ok) // 2]
    return None


def measured_busbw(path):
    """(bytes, busbw GB/s, ranks) of the measured all-reduce nearest GRADIENT_BYTES."""
    result = gpucmp_results.load(path)
    candidates = []
    for name, counters in result.benchmarks.items():
        parts = name.split("/")
        if len(parts) < 5 or parts[0] != "all_reduce" or "busbw_GBps" not in counters:
            continue
        size = int(parts[3])
        candidates.append((size, float(counters["busbw_GBps"]), int(counters.get("ranks", 0))))
    # The nearest size; of its modes, the best busbw.
    return min(candidates, key=lambda c: (abs(c[0] - GRADIENT_BYTES), -c[1]), default=None)


def projected_rates(path):
    """{gpu_key: images/s} of ROW from gpucmp-report's projection.csv."""
    rates = {}
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            if r["benchmark"] == ROW and r["kind"] == "projected" and r["seconds"]:
                rates[r["gpu_key"]] = BATCH / float(r["seconds"])
    return rates


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("root")
    parser.add_argument("out")
    parser.add_argument("--cards", type=int, default=8)
    parser.add_argument("--gpus", default="a100_80gb_sxm,h100_sxm,l20,l40s")
    parser.add_argument("--measured_gpu", default="h200_sxm", help="the database key of the GPU the run measured")
    args = parser.parse_args()
    if args.cards < 2:
        sys.exit("project_cards: --cards must be at least 2")
    gpus = load_gpus(args.root)
    for key in [args.measured_gpu] + args.gpus.split(","):
        if key not in gpus:
            sys.exit(f"project_cards: unknown GPU '{key}' (data/gpus.csv)")
    dp_path, coll_path = os.path.join(args.out, "gpucmp_training_dp.json"), os.path.join(args.out, "gpucmp_collectives.json")
    one = measured_rate(dp_path) if os.path.exists(dp_path) else None
    bus = measured_busbw(coll_path) if os.path.exists(coll_path) else None
    if one is None or bus is None:
        sys.exit(f"project_cards: needs {ROW} in gpucmp_training_dp.json and an all-reduce with busbw in gpucmp_collectives.json")
    rates = {args.measured_gpu: (one[1], "measured")}
    proj_path = os.path.join(args.out, "projection.csv")
    if os.path.exists(proj_path):
        for key, rate in projected_rates(proj_path).items():
            rates.setdefault(key, (rate, "projected (roofline)"))
    ref = gpus[args.measured_gpu]
    ref_nvlink = float(ref["nvlink_gbs"] or 0)
    size, ref_busbw, ranks = bus
    n = args.cards
    rows = []
    for key in [args.measured_gpu] + args.gpus.split(","):
        g = gpus[key]
        nvlink = float(g["nvlink_gbs"] or 0)
        if nvlink > 0 and ref_nvlink > 0:
            busbw = ref_busbw * nvlink / ref_nvlink
            link = f"NVLink {nvlink:.0f} GB/s"
            how = "measured" if key == args.measured_gpu else f"scaled from the measured by NVLink bandwidth ({nvlink:.0f}/{ref_nvlink:.0f})"
        else:
            gen = int(float(g["pcie_gen"] or 4))
            busbw = PCIE_X16_GBPS.get(gen, 31.5) * PCIE_EFFICIENCY
            link = f"PCIe gen{gen} only"
            how = f"assumed: {PCIE_EFFICIENCY:.0%} of one direction of PCIe gen{gen} x16"
        rate1, rate_how = rates.get(key, (None, "missing: no projection"))
        row = {"gpu": g["name"], "key": key, "interconnect": link, "busbw_GBps": round(busbw, 1), "busbw_source": how,
               "one_gpu_images_per_s": round(rate1) if rate1 else None, "one_gpu_source": rate_how, "cards": n}
        if rate1:
            step1 = BATCH / rate1
            allreduce = GRADIENT_BYTES * 2 * (n - 1) / n / (busbw * 1e9)
            row["allreduce_ms"] = round(allreduce * 1e3, 2)
            row["no_overlap_images_per_s"] = round(n * BATCH / (step1 + allreduce))
            row["full_overlap_images_per_s"] = round(n * BATCH / max(step1, allreduce))
            row["no_overlap_efficiency"] = round(step1 / (step1 + allreduce), 3)
        rows.append(row)
    doc = {"model": __doc__.split("Model, per GPU kind and N cards (stated in the table):")[1].split("Writes")[0].strip(),
           "gradient_bytes": GRADIENT_BYTES, "measured_allreduce": {"bytes": size, "busbw_GBps": ref_busbw, "ranks": ranks},
           "rows": rows}
    with open(os.path.join(args.out, "cards_projection.json"), "w") as f:
        json.dump(doc, f, indent=1)
    lines = [f"Data-parallel ResNet-50 AMP training, batch {BATCH} per GPU, on {n} cards: projected from one measured "
             f"{ref['name']} (one GPU: {one[1]:,.0f} img/s; all-reduce busbw {ref_busbw:.1f} GB/s at {size} bytes over "
             f"{ranks} GPUs) and data/gpus.csv. Gradients {GRADIENT_BYTES / 1e6:.1f} MB per step; no overlap is the slowest "
             "case, full overlap the bound; gpucmp's bucketed step lies between.", "",
             f"| GPU | interconnect | one GPU img/s | all-reduce busbw GB/s | all-reduce ms | {n} cards img/s, no overlap | "
             f"{n} cards img/s, full overlap | scaling, no overlap |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        def f(v, fmt="{:,.0f}"):
            return "–" if v is None else fmt.format(v)
        lines.append(f"| {r['gpu']} | {r['interconnect']} | {f(r['one_gpu_images_per_s'])} ({r['one_gpu_source']}) | "
                     f"{r['busbw_GBps']:.1f} ({r['busbw_source']}) | {f(r.get('allreduce_ms'), '{:.2f}')} | "
                     f"{f(r.get('no_overlap_images_per_s'))} | {f(r.get('full_overlap_images_per_s'))} | "
                     f"{f(r.get('no_overlap_efficiency'), '{:.1%}')} |")
    with open(os.path.join(args.out, "cards_projection.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
