# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: gpucmp contributors
"""python -m gpucmp_results FILE...: each result file's rows as a table (benchmark, mode,
status, median time, noise, samples), or the reason a file is refused (exit 1)."""
import sys

from . import ResultFileError, load


def time_text(seconds):
    if seconds is None:
        return ""
    for scale, unit in ((1, "s"), (1e-3, "ms"), (1e-6, "us")):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds * 1e9:.3g} ns"


def main(paths):
    if not paths:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    status = 0
    for path in paths:
        try:
            f = load(path)
        except (OSError, ResultFileError) as e:
            print(f"gpucmp_results: {e}", file=sys.stderr)
            status = 1
            continue
        print(f"{path}: {f.context.get('gpu_name', '?')}, {len(f.rows)} rows")
        width = max([len(r.benchmark) for r in f.rows] + [9])
        print(f"  {'benchmark':<{width}}  {'mode':<6} {'status':<11} {'median':>10} {'noise':>7} {'samples':>7}")
        for r in f.rows:
            noise = f"{100 * r.noise:.2f}%" if r.noise is not None else ""
            print(f"  {r.benchmark:<{width}}  {r.mode or '':<6} {r.status:<11} {time_text(r.seconds):>10} {noise:>7} "
                  f"{r.samples if r.samples is not None else '':>7}")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
