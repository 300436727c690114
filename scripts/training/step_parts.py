#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: gpucmp contributors
"""The "where the step's time goes" tables of `training --layers_out` files, without the
per-layer rows: for each network, precision and batch, the kernel time of the median step and
its split by part (convolution forward, data and weight gradients, batch norm, pooling,
gradient sums, optimizer, ...). The layers files hold every layer's algorithms and checks and
run to hundreds of kilobytes; this is the part worth keeping next to the results.

Usage: step_parts.py LAYERS.md... > step_parts.md
"""
import re
import sys


def sections(text):
    """(heading, median-step sentence, part table lines) per network section."""
    for block in re.split(r"^## ", text, flags=re.M)[1:]:
        heading = block.splitlines()[0].strip()
        median = re.search(r"The median step's kernels take [0-9.]+ ms[^)]*\)\.", block)
        table = []
        if "| part | pieces | ms | share |" in block:
            lines = block.split("| part | pieces | ms | share |", 1)[1].splitlines()
            table = ["| part | pieces | ms | share |"]
            for line in lines:
                if not line.startswith("|"):
                    if len(table) > 1:
                        break
                    continue
                table.append(line)
        yield heading, median.group(0) if median else "", table


def main(paths):
    if not paths:
        print(__doc__, file=sys.stderr)
        return 2
    found = 0
    for path in paths:
        with open(path, encoding="utf-8") as f:
            for heading, median, table in sections(f.read()):
                if not table:
                    continue
                found += 1
                print(f"## {heading}\n")
                if median:
                    print(median + "\n")
                print("\n".join(table) + "\n")
    if found == 0:
        print("step_parts.py: no part tables in " + ", ".join(paths), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
