#!/usr/bin/env python3
"""Renders an HTML report in headless Chromium: the screenshot is not blank, and the page as
the browser built it opens with the summary.

usage: screenshot_check.py PAGE.html OUT.png
Exit 0: the page rendered with text and coloured chart bars, its first section is the summary
(a table with a row per group) and the top of the screenshot holds it; 1: blank, out of order
or failed; 77: no Chromium on this machine (skipped).
"""
import re
import shutil
import struct
import subprocess
import sys
import zlib


def find_browser():
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


def read_png(path):
    """Returns (width, height, rows of RGB(A) tuples) for 8-bit RGB/RGBA non-interlaced PNGs."""
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG file")
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", chunk)
            if depth != 8 or color not in (2, 6) or interlace:
                raise ValueError(f"unsupported PNG (depth {depth}, colour type {color}, interlace {interlace})")
            channels = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * channels
    rows, previous = [], bytearray(stride)
    for y in range(height):
        filter_type = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for x in range(stride):
            a = line[x - channels] if x >= channels else 0
            b = previous[x]
            c = previous[x - channels] if x >= channels else 0
            if filter_type == 1:
                line[x] = (line[x] + a) & 0xFF
            elif filter_type == 2:
                line[x] = (line[x] + b) & 0xFF
            elif filter_type == 3:
                line[x] = (line[x] + (a + b) // 2) & 0xFF
            elif filter_type == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        rows.append(line)
        previous = line
    return width, height, channels, rows


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    page, png = sys.argv[1], sys.argv[2]
    browser = find_browser()
    if browser is None:
        print("SKIPPED: no Chromium on this machine (apt-get install chromium)")
        return 77
    subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    "--window-size=1400,1600", f"--screenshot={png}", "file://" + page],
                   check=True, capture_output=True, timeout=120)
    dom = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", "file://" + page],
                         check=True, capture_output=True, text=True, timeout=120).stdout
    sections = re.findall(r'<section id="([^"]+)"', dom)
    headings = re.findall(r"<h2>(.*?)</h2>", dom)
    summary = dom[dom.find('<section id="summary">'):dom.find("</section>")] if sections else ""
    print(f"sections in the rendered page: {sections}; first heading {headings[:1]}")
    if not sections or sections[0] != "summary" or not headings or headings[0] != "Summary":
        print("FAILED: the page's first section is not the summary")
        return 1
    if summary.count("<tr>") < 2:
        print("FAILED: the summary has no row")
        return 1
    width, height, channels, rows = read_png(png)
    total = width * height
    ink = coloured = 0
    for line in rows:
        for x in range(0, len(line), channels):
            r, g, b = line[x], line[x + 1], line[x + 2]
            if r < 200 or g < 200 or b < 200:
                ink += 1
            if max(r, g, b) - min(r, g, b) > 80:
                coloured += 1
    print(f"{width}x{height} screenshot: {100 * ink / total:.2f}% ink, {100 * coloured / total:.2f}% coloured")
    if ink < 0.01 * total:
        print("FAILED: the page rendered (nearly) blank")
        return 1
    if coloured < 0.002 * total:
        print("FAILED: no chart bars visible")
        return 1
    # The summary table sits at the top: its borders and text ink the first 400 rows.
    top = sum(1 for line in rows[:400] for x in range(0, len(line), channels)
              if line[x] < 200 or line[x + 1] < 200 or line[x + 2] < 200)
    if top < 0.01 * width * 400:
        print("FAILED: the top of the page is (nearly) blank: the summary is not where a reader looks first")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
