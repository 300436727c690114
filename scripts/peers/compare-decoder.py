#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: gpucmp contributors
"""gpucmp's decoder steps beside transformers', and each decode step against its roofline.

usage: compare-decoder.py GPUCMP.json TRANSFORMERS.json [--usd-per-hour PRICE] [--out-json FILE] [--out-md FILE]

GPUCMP.json is benchmarks/decoder's Google Benchmark output: decoder/.../prefill/... and
.../decode/... rows, each declaring its bytes (GB/s), and a copy/kernel/<bytes> row of the same
run. TRANSFORMERS.json is scripts/peers/transformers_decoder.py's. Per row: gpucmp's seconds and
tokens a second; transformers' fastest backend that ran and its seconds; ratio = transformers'
seconds / gpucmp's (> 1: gpucmp faster); and for a decode step the roofline fraction = (its
bytes / the copy row's GB/s) / its seconds: the share of the bandwidth bound it reaches. Rows
timed with --gpucmp_power add the board's average watts and joules a token (watts x seconds /
tokens); with --usd-per-hour, dollars per million tokens at that price (price / tokens an hour).
"""
import argparse
import json
import re
import sys


def row_key(name):
    """'decoder/llama-3-8b/bf16/decode/b1_c2048/graph/iterations:1/manual_time' -> '.../b1_c2048'."""
    name = re.sub(r"/(iterations|repeats|manual_time|real_time|min_time|threads).*$", "", name)
    return re.sub(r"/(cold|hot|graph|kernel)$", "", name)


def seconds_of(row):
    return row["real_time"] * {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[row.get("time_unit", "ns")]


def tokens_of(key):
    """Tokens a step runs: batch x prompt (prefill) or batch (decode)."""
    found = re.search(r"/b(\d+)_(p|c)(\d+)$", key)
    if not found:
        return None
    batch, kind, n = int(found.group(1)), found.group(2), int(found.group(3))
    return batch * n if kind == "p" else batch


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("gpucmp")
    parser.add_argument("transformers")
    parser.add_argument("--usd-per-hour", type=float, help="the GPU's price, for $ per million tokens")
    parser.add_argument("--out-json")
    parser.add_argument("--out-md")
    args = parser.parse_args()
    if args.usd_per_hour is not None and not (args.usd_per_hour > 0 and args.usd_per_hour < float("inf")):
        sys.exit(f"compare-decoder: --usd-per-hour must be a positive finite price, got {args.usd_per_hour}")
    try:
        with open(args.gpucmp) as f:
            ours = json.load(f)
        with open(args.transformers) as f:
            theirs = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        sys.exit(f"compare-decoder: {e}")
    measured = [b for b in ours.get("benchmarks", []) if b.get("error_occurred") is not True and "real_time" in b]
    copies = [b for b in measured if row_key(b["name"]).startswith("copy/kernel/") and "GB/s" in b]
    copy_gbps = max((c["GB/s"] for c in copies), default=None)
    peers = {}
    for r in theirs.get("rows", []):
        if r.get("seconds"):
            peers.setdefault(r["key"], []).append(r)
    rows = []
    for b in measured:
        key = row_key(b["name"])
        if not key.startswith("decoder/"):
            continue
        seconds, tokens = seconds_of(b), tokens_of(key)
        row = {"key": key, "seconds": seconds, "tokens_per_s": tokens / seconds if tokens else None}
        if tokens and b.get("power_w"):
            row["watts"] = b["power_w"]
            row["joules_per_token"] = b["power_w"] * seconds / tokens
        if tokens and args.usd_per_hour:
            row["usd_per_million_tokens"] = args.usd_per_hour / (tokens / seconds * 3600) * 1e6
        if "/decode/" in key and copy_gbps and "GB/s" in b:
            row["roofline_fraction"] = b["GB/s"] / copy_gbps  # (bytes / copy rate) / seconds
            row["copy_gbps"] = copy_gbps
        if key in peers:
            best = min(peers[key], key=lambda r: r["seconds"])
            row.update(peer_backend=best["backend"], peer_seconds=best["seconds"], ratio=best["seconds"] / seconds)
            row["peer"] = {r["backend"]: r["seconds"] for r in peers[key]}
        rows.append(row)
    if not rows:
        sys.exit(f"compare-decoder: {args.gpucmp} holds no decoder row")
    out = {"gpu": ours.get("context", {}).get("gpu_name", ""), "transformers": theirs.get("transformers"),
           "torch": theirs.get("torch"), "rows": rows}
    if args.out_json:
        with open(args.out_json, "w") as f:
            json.dump(out, f, indent=1)
            f.write("\n")
    lines = ["| step | gpucmp ms | tokens/s | transformers (fastest) ms | ratio (transformers / gpucmp) | "
             "share of the bandwidth roofline | W | J/token | $ / M tokens |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        peer = f"{r['peer_seconds'] * 1e3:.2f} ({r['peer_backend']})" if "ratio" in r else "–"
        ratio = f"{r['ratio']:.2f}" if "ratio" in r else "–"
        roof = f"{r['roofline_fraction']:.2f}" if "roofline_fraction" in r else "–"
        rate = f"{r['tokens_per_s']:.0f}" if r["tokens_per_s"] else "–"
        watts = f"{r['watts']:.0f}" if "watts" in r else "–"
        joules = f"{r['joules_per_token']:.3g}" if "joules_per_token" in r else "–"
        dollars = f"{r['usd_per_million_tokens']:.3g}" if "usd_per_million_tokens" in r else "–"
        lines.append(f"| {r['key']} | {r['seconds'] * 1e3:.2f} | {rate} | {peer} | {ratio} | {roof} | {watts} | {joules} | {dollars} |")
    table = "\n".join(lines) + "\n"
    if args.out_md:
        with open(args.out_md, "w") as f:
            f.write(table)
    else:
        sys.stdout.write(table)


if __name__ == "__main__":
    main()
