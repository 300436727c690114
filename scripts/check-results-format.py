#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: gpucmp contributors
"""docs/results-format.md's table of keys is gpucmp::result_keys() (measure/result_schema.hpp):
the same keys in the same order, each with the same unit and presence.

usage: check-results-format.py REPO_ROOT   (exit 0: in sync; 1: each difference printed)
"""
import os
import re
import sys


def header_keys(root):
    text = open(os.path.join(root, "include", "gpucmp", "measure", "result_schema.hpp")).read()
    table = text[text.index("static const std::vector<result_key> keys = {"):]
    table = table[:table.index("return keys;")]
    return [(k, u or "—", p) for k, u, p in re.findall(r'\{"(\w+)",\s*"([^"]*)",\s*key_presence::(\w+),', table)]


def doc_keys(root):
    rows = []
    for line in open(os.path.join(root, "docs", "results-format.md")):
        m = re.match(r"\| `(\w+)` \| ([^|]+) \| (\w+) \|", line)
        if m:
            rows.append((m.group(1), m.group(2).strip(), m.group(3)))
    return rows


def main():
    root = sys.argv[1]
    code, doc = header_keys(root), doc_keys(root)
    if not code:
        print("check-results-format: no keys found in result_schema.hpp")
        return 1
    if code == doc:
        print(f"check-results-format: {len(code)} keys, docs/results-format.md matches result_keys()")
        return 0
    for i in range(max(len(code), len(doc))):
        a = code[i] if i < len(code) else None
        b = doc[i] if i < len(doc) else None
        if a != b:
            print(f"check-results-format: row {i + 1}: result_keys() has {a}, docs/results-format.md has {b}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
