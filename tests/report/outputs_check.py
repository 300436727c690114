#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: gpucmp contributors
"""gpucmp-report's outputs never replace what they should not: a symlinked output writes its
target and stays a symlink, a pipe is written in place (not replaced by a regular file), a
regular file is replaced whole with nothing left beside it; a directory given as input and a
non-finite price are refused by name.

usage: outputs_check.py GPUCMP_REPORT INPUT_JSON"""
import os
import stat
import subprocess
import sys
import tempfile
import threading

report, source = sys.argv[1], sys.argv[2]
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAILED:", what)


def run(*args):
    return subprocess.run([report, *args], capture_output=True, text=True, timeout=60)


with tempfile.TemporaryDirectory() as t:
    # A regular file: replaced whole, no temporary file left.
    plain = os.path.join(t, "plain.md")
    with open(plain, "w") as f:
        f.write("old\n")
    done = run("compare", source, "--markdown", plain)
    text = open(plain).read()
    check(done.returncode == 0 and "old" not in text and "|" in text, f"a regular file gets the report ({done.stderr})")
    check(sorted(os.listdir(t)) == ["plain.md"], f"nothing left beside it: {os.listdir(t)}")

    # A symlink: its target gets the report, the link stays a link.
    target = os.path.join(t, "target.md")
    with open(target, "w") as f:
        f.write("old\n")
    link = os.path.join(t, "link.md")
    os.symlink(target, link)
    done = run("compare", source, "--markdown", link, "--csv", os.path.join(t, "with_link.csv"))
    check(done.returncode == 0, f"a symlinked output is written ({done.stderr})")
    check(os.path.islink(link) and os.readlink(link) == target, "the symlink is still a symlink to its target")
    check("old" not in open(target).read() and "|" in open(target).read(), "the symlink's target holds the report")

    # A pipe: written in place, still a pipe afterwards.
    pipe = os.path.join(t, "pipe")
    os.mkfifo(pipe)
    got = []
    reader = threading.Thread(target=lambda: got.append(open(pipe).read()), daemon=True)
    reader.start()
    done = run("compare", source, "--markdown", pipe)
    reader.join(timeout=30)
    check(done.returncode == 0 and got and "|" in got[0], f"the pipe's reader gets the report ({done.stderr})")
    check(stat.S_ISFIFO(os.lstat(pipe).st_mode), "the pipe is still a pipe")

    # Refusals by name.
    done = run("compare", t, "--markdown", os.path.join(t, "never.md"))
    check(done.returncode == 1 and "is a directory, not a result file" in done.stderr, f"a directory input ({done.stderr})")
    for price in ("inf", "nan", "-1", "0"):
        done = run("compare", source, "--price", f"h200_sxm={price}", "--markdown", os.path.join(t, "never.md"))
        check(done.returncode == 1 and "positive, finite price" in done.stderr, f"price {price} refused ({done.stderr})")
    check(not os.path.exists(os.path.join(t, "never.md")), "no output written for a refused run")

print("outputs_check:", "FAILED" if failures else "passed")
sys.exit(1 if failures else 0)
