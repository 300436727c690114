#!/usr/bin/env python3
"""Checks that hostile benchmark and GPU names come out of gpucmp-report escaped.

usage: hostile_names_check.py REPORT_BINARY INPUT.json OUT_DIR [--browser]
The input's names hold <script>, event-handler attributes, quotes, &, |, backticks, a
markdown link, newlines, invalid UTF-8 and spreadsheet formulas. Checked: every output is
valid UTF-8; the HTML and SVG hold no element or attribute that came from a name; the
markdown table keeps one row per benchmark with no raw HTML; every CSV cell that starts with
= + - @ is quoted with a leading '. With --browser the HTML is loaded in headless Chromium,
where each injected script would set data-injected on the page's root element: it must not
be set. Exit 0: all passed; 1: a check failed; 77: --browser and no Chromium here.
"""
import csv
import html.parser
import io
import os
import re
import shutil
import subprocess
import sys


class tag_collector(html.parser.HTMLParser):
    """Every start tag of a page with its attributes, as a browser's parser sees them."""

    def __init__(self):
        super().__init__()
        self.tags = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, [name for name, _ in attrs]))


def main():
    report, source, out = sys.argv[1:4]
    browser = "--browser" in sys.argv[4:]
    os.makedirs(out, exist_ok=True)
    md_path, csv_path, html_path = f"{out}/hostile.md", f"{out}/hostile.csv", f"{out}/hostile.html"
    subprocess.run([report, "compare", source, "--project", "a100_80gb_sxm",
                    "--markdown", md_path, "--csv", csv_path, "--html", html_path], check=True)
    failures = []

    def check(ok, what):
        print(("ok   " if ok else "FAIL ") + what)
        if not ok:
            failures.append(what)

    texts = {}
    for path in (md_path, csv_path, html_path):
        raw = open(path, "rb").read()
        try:
            texts[path] = raw.decode("utf-8")
            check(True, f"{path} is valid UTF-8")
        except UnicodeDecodeError as e:
            check(False, f"{path} is valid UTF-8 ({e})")
            texts[path] = raw.decode("utf-8", "replace")
    html, md, table = texts[html_path], texts[md_path], texts[csv_path]

    parser = tag_collector()
    parser.feed(html)
    names = {tag for tag, _ in parser.tags}
    check(not names & {"script", "img", "iframe", "object", "embed"}, f"the HTML holds only the report's own elements ({sorted(names)})")
    handlers = [(tag, a) for tag, attrs in parser.tags for a in attrs if a.startswith("on")]
    check(not handlers, f"no HTML or SVG element carries an event-handler attribute ({handlers[:3]})")
    check("&lt;script&gt;" in html, "the HTML shows the names' <script> as text")

    # Inside a code span markdown shows text as written (no HTML, no links); outside one,
    # nothing from a name may be raw HTML or a link.
    outside_code = re.sub(r"`[^`]*`", "", md)
    check(not re.search(r"<(script|img|svg)", outside_code, re.I), "the markdown holds no raw HTML from a name")
    check("](javascript:" not in outside_code.replace("\\]", ""), "the markdown makes no link from a name")
    rows = [line for line in md.splitlines() if line.startswith("| `xss/")]
    check(len(rows) >= 8 and all(line.rstrip().endswith("|") for line in rows),
          f"each hostile name stays on one markdown table row ({len(rows)} rows)")
    check("line\\x0Abreak\\x0D\\x09tab" in md, "control characters show as \\xNN in the markdown")

    parsed = list(csv.reader(io.StringIO(table)))
    check(all(len(r) == len(parsed[0]) for r in parsed), "every CSV row has the header's number of fields")
    firsts = [r[0] for r in parsed[1:]]
    formulas = [f for f in firsts if f[:1] in "=+-@"]
    check(not formulas, f"no CSV cell starts with = + - @ ({formulas[:3]})")
    check(any(f.startswith("'=HYPERLINK") for f in firsts) and any(f.startswith("'@SUM") for f in firsts),
          "formula-like names are kept with a leading '")

    if browser:
        chromium = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")
                         if shutil.which(n)), None)
        if chromium is None:
            print("SKIPPED: no Chromium on this machine (apt-get install chromium)")
            return 77
        dom = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=3000",
                              "--dump-dom", "file://" + html_path], capture_output=True, text=True, timeout=120).stdout
        root = re.search(r"<html[^>]*>", dom)
        check(root is not None, "Chromium rendered the page")
        check(root is not None and "data-injected" not in root.group(0),
              "no injected script ran in Chromium (the page's root has no data-injected)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
