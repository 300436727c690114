#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: gpucmp contributors
"""Memory-bound rows as a fraction of the copy rate measured in the same run.

usage: bandwidth-fraction.py RESULTS.json [--out-json FILE] [--out-md FILE] [--prefix P ...]
                             [--match REGEX] [--peer PEER.json]

RESULTS.json is a gpucmp Google Benchmark output (benchmarks/transformer_ops writes one)
holding both the operations' rows and verified copy-kernel rows (copy/kernel/<bytes>). Each
operation row (names starting with a --prefix: rmsnorm, rope and swiglu by default) is read
against the copy row of the same timing mode whose bytes moved (read + written) are closest to
its own, so a row and its copy stream the same amount of memory the same way (a cold row's
copy starts from a flushed L2 too): fraction = row GB/s / copy GB/s. Writes a JSON of
{"rows": [{"key", "gbps", "copy_key", "copy_gbps", "fraction", "algorithm"}]} (key: the row's
name without Google Benchmark's suffixes, and without its mode when that is graph) and a
Markdown table. With --peer
(another implementation's {"rows": [{"key", "seconds"}]} on the same rows, from the same run:
scripts/peers/torch_gemv.py), each row also gets the peer's GB/s over the same bytes and
ratio = the peer's time / gpucmp's (> 1: gpucmp faster).
"""
import argparse
import json
import re
import sys


def row_key(name):
    """'rmsnorm/bf16/8192x4096/graph/iterations:1/manual_time' -> 'rmsnorm/bf16/8192x4096';
    another mode stays: 'gemv/bf16/b1_n4096_k4096/cold/...' -> 'gemv/bf16/b1_n4096_k4096/cold'."""
    name = re.sub(r"/(iterations|repeats|manual_time|real_time|min_time|threads).*$", "", name)
    return re.sub(r"/graph$", "", name)


def mode_of(key):
    """The timing mode a row_key() ends with: cold, hot or kernel, or graph when it names none."""
    found = re.search(r"/(cold|hot|kernel)$", key)
    return found.group(1) if found else "graph"


def moved_bytes(row):
    """Bytes read + written by one call: GB/s x the time of a call."""
    scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[row.get("time_unit", "ns")]
    return row["GB/s"] * 1e9 * row["real_time"] * scale


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results")
    parser.add_argument("--out-json")
    parser.add_argument("--out-md")
    parser.add_argument("--prefix", action="append", help="operation rows to read (default: rmsnorm, rope, swiglu)")
    parser.add_argument("--peer", help="a peer's seconds per call on the same rows")
    parser.add_argument("--match", help="only rows (of the prefixes) whose key matches this regex")
    args = parser.parse_args()
    prefixes = tuple(p.rstrip("/") + "/" for p in (args.prefix or ["rmsnorm", "rope", "swiglu"]))
    try:
        with open(args.results) as f:
            doc = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        sys.exit(f"bandwidth-fraction: cannot read {args.results}: {e}")
    measured = [b for b in doc.get("benchmarks", []) if "GB/s" in b and b.get("error_occurred") is not True]
    copies = [b for b in measured if row_key(b["name"]).startswith("copy/kernel/")]
    modes = {mode_of(row_key(c["name"])) for c in copies}
    peer = {}
    if args.peer:
        try:
            with open(args.peer) as f:
                peer_doc = json.load(f)
        except (OSError, json.JSONDecodeError) as e:
            sys.exit(f"bandwidth-fraction: cannot read {args.peer}: {e}")
        peer = {r["key"]: r["seconds"] for r in peer_doc.get("rows", []) if r.get("seconds")}
    if not copies:
        sys.exit(f"bandwidth-fraction: {args.results} holds no copy/kernel row to read the operations against")
    rows = []
    for b in measured:
        key = row_key(b["name"])
        if not key.startswith(prefixes) or (args.match and not re.search(args.match, key)):
            continue
        moved = moved_bytes(b)
        if mode_of(key) not in modes:
            sys.exit(f"bandwidth-fraction: {key} has no copy row timed in its mode ({mode_of(key)})")
        same_mode = [c for c in copies if mode_of(row_key(c["name"])) == mode_of(key)]
        copy = min(same_mode, key=lambda c: abs(moved_bytes(c) - moved))
        row = {"key": key, "gbps": b["GB/s"], "moved_bytes": moved, "copy_key": row_key(copy["name"]),
               "copy_gbps": copy["GB/s"], "fraction": b["GB/s"] / copy["GB/s"],
               "algorithm": b.get("label", "").split(";")[0]}
        if key in peer:
            seconds = moved / (b["GB/s"] * 1e9)
            row["peer_gbps"] = moved / peer[key] / 1e9
            row["ratio"] = peer[key] / seconds
        rows.append(row)
    if not rows:
        sys.exit(f"bandwidth-fraction: {args.results} holds no row starting with {', '.join(prefixes)}")
    context = doc.get("context", {})
    out = {"gpu": context.get("gpu_name", context.get("device_name", "")), "source": args.results, "rows": rows}
    if args.peer:
        out["peer"] = args.peer
    if args.out_json:
        with open(args.out_json, "w") as f:
            json.dump(out, f, indent=1)
            f.write("\n")
    peer_head = " peer GB/s | ratio (peer time / gpucmp's) |" if peer else ""
    lines = ["| row | GB/s | copy of the same bytes, GB/s | fraction of the copy rate |" + peer_head + " algorithm |",
             "|---" * (5 + (2 if peer else 0)) + "|"]
    for r in rows:
        peer_cells = ""
        if peer:
            peer_cells = f" {r['peer_gbps']:.0f} | {r['ratio']:.2f} |" if "ratio" in r else " – | – |"
        lines.append(f"| {r['key']} | {r['gbps']:.0f} | {r['copy_gbps']:.0f} | {r['fraction']:.2f} |{peer_cells}"
                     f" {r['algorithm']} |")
    table = "\n".join(lines) + "\n"
    if args.out_md:
        with open(args.out_md, "w") as f:
            f.write(table)
    else:
        sys.stdout.write(table)


if __name__ == "__main__":
    main()
