#!/usr/bin/env python3
"""results/ is product, not a notebook: at most 1 MB in all, and every file in it named by a
doc, script or test (its file name appears outside results/).

usage: check-results.py REPO_ROOT
Exit 0, or 1 naming each file that is named nowhere and the total when it is over 1 MB;
77 (skipped) outside a git checkout.
"""
import os
import subprocess
import sys

LIMIT_BYTES = 1_000_000
# Where a results file may be named: every tracked text file outside results/.
NAMING_SUFFIXES = (".md", ".py", ".sh", ".txt", ".cmake", ".cpp", ".cu", ".cuh", ".hpp", ".json", ".yml", "/run")


def tracked(root):
    out = subprocess.run(["git", "-C", root, "ls-files"], capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines() if line]


def main():
    root = sys.argv[1]
    try:
        files = tracked(root)
    except (OSError, subprocess.CalledProcessError):
        print("check-results: SKIPPED: not a git checkout")
        return 77
    results = [f for f in files if f.startswith("results/")]
    texts = []
    for f in files:
        if f.startswith("results/") or not (f.endswith(NAMING_SUFFIXES) or os.path.basename(f) == "CMakeLists.txt"):
            continue
        try:
            texts.append(open(os.path.join(root, f), encoding="utf-8", errors="replace").read())
        except OSError:
            continue
    corpus = "\n".join(texts)
    failures = []
    total = 0
    for f in results:
        path = os.path.join(root, f)
        if not os.path.exists(path):
            continue  # deleted in the working tree
        total += os.path.getsize(path)
        if os.path.basename(f) not in corpus:
            failures.append(f"{f}: named by no doc, script or test (delete it, or say in a doc what it shows)")
    if total > LIMIT_BYTES:
        failures.append(f"results/ holds {total} bytes, over the {LIMIT_BYTES}-byte limit")
    for line in failures:
        print("check-results: " + line)
    print(f"check-results: {len(results)} files, {total} bytes" + ("" if failures else ", every one named"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
