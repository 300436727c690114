#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: gpucmp contributors
"""The record of a fuzz run, one JSON file per target, from the table scripts/fuzz.sh prints.

usage: fuzz_record.py TABLE.md COMMIT DATE MAX_LEN OUT_DIR
Writes OUT_DIR/fuzz_TARGET.json: {"target", "executions", "seconds", "crashes",
"executions_without_a_crash" (0 when one crashed), "max_len", "commit", "date"} for each row of TABLE.md (commit: the tree fuzzed; the acceptance row list
lab/acceptance/reliability.json reads these, and marks a record stale when the parser it
covers changed after that commit).
"""
import json
import os
import sys


def main():
    if len(sys.argv) != 6:
        sys.exit(__doc__)
    table, commit, date, max_len, out = sys.argv[1:]
    os.makedirs(out, exist_ok=True)
    written = 0
    for line in open(table, encoding="utf-8"):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4 or not cells[0].startswith("fuzz_"):
            continue
        number = lambda text: int(text) if text.isdigit() else None  # noqa: E731 ("?" when libFuzzer said nothing)
        executions, crashes = number(cells[1]), number(cells[3])
        record = {"target": cells[0], "executions": executions, "seconds": number(cells[2]), "crashes": crashes,
                  "executions_without_a_crash": executions if crashes == 0 and executions is not None else 0, "max_len": int(max_len) if max_len.isdigit() else None,
                  "commit": commit, "date": date}
        with open(os.path.join(out, cells[0] + ".json"), "w", encoding="utf-8") as f:
            json.dump(record, f, indent=1)
            f.write("\n")
        written += 1
    if written == 0:
        sys.exit(f"fuzz_record: no fuzz_* row in {table}")


if __name__ == "__main__":
    main()
