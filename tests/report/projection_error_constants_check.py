#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: gpucmp contributors
"""The projection error the report draws as a band is the one last measured.

usage: projection_error_constants_check.py PROJECTION_HPP PROJECTION_ERROR_MD

Reads projection_mean_abs_error and projection_largest_abs_error from
include/gpucmp/specs/projection.hpp and the line "Mean absolute error X%, largest Y%." that
scripts/projection-error.py writes to results/h200/projection_error.md, and fails when they
differ (re-measure, then change both).
"""
import re
import sys


def main():
    header, measured = (open(p, encoding="utf-8").read() for p in sys.argv[1:3])
    constants = {name: float(value) for name, value in
                 re.findall(r"constexpr double (projection_\w+_error) = ([0-9.]+);", header)}
    line = re.search(r"Mean absolute error ([0-9.]+)%, largest ([0-9.]+)%\.", measured)
    if line is None or set(constants) != {"projection_mean_abs_error", "projection_largest_abs_error"}:
        print(f"projection_error_constants_check: FAILED: constants {sorted(constants)}, measured line {bool(line)}")
        return 1
    mean, largest = float(line.group(1)) / 100, float(line.group(2)) / 100
    ok = (abs(constants["projection_mean_abs_error"] - mean) < 5e-4 and
          abs(constants["projection_largest_abs_error"] - largest) < 5e-4)
    print(f"projection_error_constants_check: {'passed' if ok else 'FAILED'}: header {constants}, measured "
          f"mean {mean}, largest {largest}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
