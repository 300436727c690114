#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: gpucmp contributors
"""gpucmp's decoder training steps beside PyTorch's, and what checkpointing costs and saves.

usage: compare-decoder-training.py GPUCMP.json TORCH.json [--out-json FILE] [--out-md FILE]

GPUCMP.json is `benchmarks/decoder train`'s Google Benchmark output (decoder_train/... rows with
TFLOP/s, pct_of_peak: MFU, items/s: tokens a second, memory_gb, largest_batch, loss_first and
loss_last); TORCH.json is scripts/peers/torch_decoder_train.py's. Per row: both sides' seconds a
step, ratio = PyTorch's seconds / gpucmp's (> 1: gpucmp faster), gpucmp's MFU and tokens a
second, both sides' memory, and for the whole model its loss after the timed steps over its loss
before (loss_ratio: the step trains). Then, for each shape measured with checkpointing and without, on
each side: its time cost (checkpointed / plain - 1) and its memory saving (1 - checkpointed /
plain memory).
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
compare_decoder = __import__("compare-decoder")  # row_key, seconds_of


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("gpucmp")
    parser.add_argument("torch")
    parser.add_argument("--out-json")
    parser.add_argument("--out-md")
    args = parser.parse_args()
    try:
        with open(args.gpucmp) as f:
            ours = json.load(f)
        with open(args.torch) as f:
            theirs = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        sys.exit(f"compare-decoder-training: {e}")
    peer = {r["key"]: r for r in theirs.get("rows", [])}
    rows = []
    for b in ours.get("benchmarks", []):
        key = compare_decoder.row_key(b.get("name", ""))
        if not key.startswith("decoder_train/"):
            continue
        row = dict(key=key)
        if b.get("error_occurred") is True or "real_time" not in b:
            row["error"] = b.get("error_message", "no time")
        else:
            row.update(seconds=compare_decoder.seconds_of(b), mfu_pct=b.get("pct_of_peak"), tokens_per_s=b.get("items/s"),
                       tflops=b.get("TFLOP/s"), memory_gb=b.get("memory_gb"), largest_batch=b.get("largest_batch"),
                       loss_first=b.get("loss_first"), loss_last=b.get("loss_last"))
            if b.get("loss_first") and b.get("loss_last") is not None:
                row["loss_ratio"] = b["loss_last"] / b["loss_first"]
        p = peer.get(key)
        if p is not None:
            if "error" in p:
                row["torch_error"] = p["error"]
            else:
                row.update(torch_seconds=p["seconds"], torch_peak_gb=p["peak_bytes"] * 1e-9)
                if "seconds" in row:
                    row["ratio"] = p["seconds"] / row["seconds"]
        rows.append(row)
    if not rows:
        sys.exit(f"compare-decoder-training: no decoder_train rows in {args.gpucmp}")
    by_key = {r["key"]: r for r in rows}
    checkpointing = []
    for r in rows:
        if r["key"].endswith("/checkpointing") or (r["key"] + "/checkpointing") not in by_key:
            continue
        c = by_key[r["key"] + "/checkpointing"]
        entry = dict(key=r["key"])
        for side, seconds, memory in (("gpucmp", "seconds", "memory_gb"), ("torch", "torch_seconds", "torch_peak_gb")):
            if r.get(seconds) and c.get(seconds):
                entry[f"{side}_time_cost"] = c[seconds] / r[seconds] - 1
            if r.get(memory) and c.get(memory):
                entry[f"{side}_memory_saving"] = 1 - c[memory] / r[memory]
                entry[f"{side}_memory_gb"] = [r[memory], c[memory]]
        if r.get("largest_batch") is not None and c.get("largest_batch") is not None:
            entry["largest_batch"] = [r["largest_batch"], c["largest_batch"]]
        checkpointing.append(entry)

    def fmt(value, pattern):
        return pattern.format(value) if isinstance(value, (int, float)) else "—"

    lines = ["| step | gpucmp ms | tokens/s | MFU | memory GB | PyTorch ms | PyTorch GB | PyTorch / gpucmp |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ours_ms = fmt(r["seconds"] * 1e3, "{:.1f}") if "seconds" in r else r.get("error", "—")
        theirs_ms = fmt(r["torch_seconds"] * 1e3, "{:.1f}") if "torch_seconds" in r else r.get("torch_error", "—")
        lines.append(f"| {r['key']} | {ours_ms} | {fmt(r.get('tokens_per_s'), '{:,.0f}')} | {fmt(r.get('mfu_pct'), '{:.1f} %')} | "
                     f"{fmt(r.get('memory_gb'), '{:.1f}')} | {theirs_ms} | {fmt(r.get('torch_peak_gb'), '{:.1f}')} | "
                     f"{fmt(r.get('ratio'), '{:.2f}x')} |")
    if checkpointing:
        lines += ["", "| checkpointing | gpucmp time cost | gpucmp memory saving | largest batch (off → on) | "
                      "PyTorch time cost | PyTorch memory saving |", "|---|---|---|---|---|---|"]
        for e in checkpointing:
            largest = "{:.0f} → {:.0f}".format(*e["largest_batch"]) if "largest_batch" in e else "—"
            lines.append(f"| {e['key']} | {fmt(e.get('gpucmp_time_cost'), '{:+.1%}')} | {fmt(e.get('gpucmp_memory_saving'), '{:.1%}')} | "
                         f"{largest} | {fmt(e.get('torch_time_cost'), '{:+.1%}')} | {fmt(e.get('torch_memory_saving'), '{:.1%}')} |")
    table = "\n".join(lines) + "\n"
    result = dict(gpu=theirs.get("gpu"), torch=theirs.get("torch"), transformers=theirs.get("transformers"), rows=rows,
                  checkpointing=checkpointing)
    if args.out_json:
        with open(args.out_json, "w") as f:
            json.dump(result, f, indent=1)
    if args.out_md:
        with open(args.out_md, "w") as f:
            f.write(table)
    sys.stdout.write(table)


if __name__ == "__main__":
    main()
