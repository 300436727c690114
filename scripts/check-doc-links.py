#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: gpucmp contributors
"""Every relative link in the repository's markdown goes somewhere: the file exists, and an
anchor (#section) names a heading of that file, slugged as GitHub slugs them.

usage: check-doc-links.py REPO_ROOT
Checks README.md and every tracked .md under docs/ (the guides and docs/results/). External
links (http:, https:, mailto:) are not fetched. Exit 0, or 1 naming each broken link as
FILE:LINE: TARGET and why.
"""
import os
import re
import subprocess
import sys

# [text](target) outside code spans; the target ends at the first space or ')'.
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def slug(heading):
    """GitHub's anchor for a heading: lower case, markup and punctuation dropped (letters,
    digits, spaces, '-' and '_' kept), each space a '-'."""
    text = re.sub(r"`([^`]*)`", r"\1", heading)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = text.strip().lower()
    text = "".join(c for c in text if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


def anchors(path):
    """The anchors of a markdown file's headings (repeats get -1, -2, ... as on GitHub)."""
    seen, out = {}, set()
    fenced = False
    for line in open(path, encoding="utf-8"):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        m = None if fenced else HEADING.match(line)
        if not m:
            continue
        base = slug(m.group(2))
        n = seen.get(base, 0)
        out.add(base if n == 0 else f"{base}-{n}")
        seen[base] = n + 1
    return out


def markdown_files(root):
    try:
        listed = subprocess.run(["git", "-C", root, "ls-files", "README.md", "docs"], capture_output=True, text=True,
                                check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        listed = ["README.md"] + [os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(os.path.join(root, "docs"))
                                  for f in fs]
    return sorted(f for f in listed if f.endswith(".md") and os.path.exists(os.path.join(root, f)))


def broken_links(root):
    failures = []
    cache = {}
    for doc in markdown_files(root):
        fenced = False
        for number, line in enumerate(open(os.path.join(root, doc), encoding="utf-8"), 1):
            if line.lstrip().startswith("```"):
                fenced = not fenced
                continue
            if fenced:
                continue
            for target in LINK.findall(re.sub(r"`[^`]*`", "", line)):
                if re.match(r"^[a-z]+:", target):
                    continue  # http:, https:, mailto:
                path, _, anchor = target.partition("#")
                full = os.path.normpath(os.path.join(root, os.path.dirname(doc), path)) if path else os.path.join(root, doc)
                if not os.path.exists(full):
                    failures.append(f"{doc}:{number}: {target}: no such file")
                    continue
                if anchor and full.endswith(".md"):
                    if full not in cache:
                        cache[full] = anchors(full)
                    if anchor not in cache[full]:
                        failures.append(f"{doc}:{number}: {target}: no heading with anchor '{anchor}' in "
                                        f"{os.path.relpath(full, root)}")
    return failures


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    failures = broken_links(root)
    for f in failures:
        print("check-doc-links: " + f)
    print(f"check-doc-links: {len(markdown_files(root))} files, " + (f"{len(failures)} broken links" if failures else "every link resolves"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
