#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: gpucmp contributors
"""Each search's candidates by provider: how close the best of one came to the best of another.

usage: search-providers.py SEARCH_LOG.jsonl --provider NAME=REGEX [--provider ...]
                           [--match REGEX] [--out-json FILE] [--out-md FILE]

SEARCH_LOG.jsonl is what a gpucmp benchmark writes with --gpucmp_search_log=FILE: one line a
search, every candidate's median time. A candidate belongs to the first --provider whose REGEX
its algorithm's description matches (searched, not anchored); the last provider given may be
`NAME=.` for the rest. For each search (those whose benchmark name matches --match), each
provider's fastest verified candidate and its time, the chosen algorithm, and ratio = the first
provider's best / the second's (> 1: the second provider faster). A search without a candidate
of some provider gets null there. Candidates that failed verification are left out.
"""
import argparse
import json
import re
import sys

from named_patterns import parse_named_patterns  # beside this script


def parse_providers(specs):
    providers = parse_named_patterns(specs, "search-providers", "--provider")
    if len(providers) < 2:
        sys.exit("search-providers: give at least two --provider NAME=REGEX")
    return providers


def summarize(line, providers):
    best = {name: None for name, _ in providers}
    for c in line.get("candidates", []):
        if c.get("failure") or not isinstance(c.get("us"), (int, float)):
            continue
        for name, pattern in providers:
            if pattern.search(c.get("algorithm", "")):
                if best[name] is None or c["us"] < best[name]["us"]:
                    best[name] = {"algorithm": c["algorithm"], "us": round(c["us"], 3)}
                break
    first, second = best[providers[0][0]], best[providers[1][0]]
    ratio = first["us"] / second["us"] if first and second and second["us"] > 0 else None
    return {"benchmark": line.get("benchmark", ""), "chosen": line.get("chosen", ""), "best": best, "ratio": ratio}


def markdown(rows, providers):
    names = [name for name, _ in providers]
    out = ["| search | " + " | ".join(f"{n} best (µs)" for n in names) + f" | {names[0]} / {names[1]} | {names[1]}'s fastest |",
           "|---|" + "---:|" * len(names) + "---:|---|"]
    for r in rows:
        cells = [f"{r['best'][n]['us']:.1f}" if r["best"][n] else "–" for n in names]
        ratio = f"{r['ratio']:.2f}" if r["ratio"] is not None else "–"
        fastest = r["best"][names[1]]["algorithm"] if r["best"][names[1]] else "–"
        out.append(f"| {r['benchmark']} | " + " | ".join(cells) + f" | {ratio} | {fastest} |")
    return "\n".join(out) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("search_log")
    ap.add_argument("--provider", action="append", default=[], help="NAME=REGEX (the first two are compared)")
    ap.add_argument("--match", default="", help="only searches whose benchmark name matches this REGEX")
    ap.add_argument("--out-json")
    ap.add_argument("--out-md")
    args = ap.parse_args(argv)
    providers = parse_providers(args.provider)
    try:
        match = re.compile(args.match)
    except re.error as e:
        sys.exit(f"search-providers: bad --match '{args.match}': {e}")
    rows = []
    try:
        with open(args.search_log, encoding="utf-8") as f:
            for number, text in enumerate(f, 1):
                if not text.strip():
                    continue
                try:
                    line = json.loads(text)
                except json.JSONDecodeError as e:
                    sys.exit(f"search-providers: {args.search_log}:{number}: not JSON ({e})")
                if not isinstance(line, dict):
                    sys.exit(f"search-providers: {args.search_log}:{number}: not a search (a JSON object)")
                if match.search(line.get("benchmark", "")):
                    rows.append(summarize(line, providers))
    except OSError as e:
        sys.exit(f"search-providers: {e}")
    if not rows:
        sys.exit(f"search-providers: no search in {args.search_log} matches '{args.match}'")
    table = markdown(rows, providers)
    if args.out_json:
        with open(args.out_json, "w", encoding="utf-8") as f:
            json.dump({"providers": [n for n, _ in providers], "rows": rows}, f, separators=(",", ":"))
            f.write("\n")
    if args.out_md:
        with open(args.out_md, "w", encoding="utf-8") as f:
            f.write(table)
    sys.stdout.write(table)


if __name__ == "__main__":
    main()
