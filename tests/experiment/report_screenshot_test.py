#!/usr/bin/env python3
"""kvtier experiment's report in headless Chromium: a screenshot must hold
every plot's frame (the #999999 rectangle each SVG plot draws around its
area) and, inside each frame, pixels of the palette's colours: the lines
and bars were drawn, not just the page loaded.

    report_screenshot_test.py path/to/kvtier WORK_DIR
Exit 77 (skipped) when no chromium is installed (Debian package chromium).
"""
import os
import shutil
import struct
import subprocess
import sys
import zlib

PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"]
FRAME = (0x99, 0x99, 0x99)
FRAME_WIDTH = 560  # svg_plot.cpp: plot_w
FRAME_HEIGHT = 280  # plot_h
TOLERANCE = 6  # per channel: colour management may move a value by a step or two

SPEC = """
[experiment]
title = "screenshot test"
mode = "timed"

[base.model]
preset = "llama-3-8b"

[base.tiers.nvme]
enabled = false

[base.sim]
trace_format = "synthetic"

[base.sim.synthetic]
requests = 120
rate_per_s = 20.0
shared_prefix_tokens = 1024
prefix_groups = 2
turns_per_session = 3
input = { dist = "lognormal", mean = 1500.0, sigma = 0.6 }
output = 128

[sweep]
"tiers.hbm.capacity" = ["2GB", "8GB"]
"""


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def read_png(path):
    """(width, height, rows of (r, g, b)) of an 8-bit RGB or RGBA PNG."""
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        fail(path + " is not a PNG")
    pos, idat, width, height, channels = 8, b"", 0, 0, 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", body[:10])
            if depth != 8 or colour not in (2, 6) or body[12] != 0:
                fail("unexpected PNG format: depth %d colour %d interlace %d" % (depth, colour, body[12]))
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * channels
    rows, previous = [], bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        for i in range(stride):
            a = line[i - channels] if i >= channels else 0
            b = previous[i]
            c = previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + a) & 255
            elif kind == 2:
                line[i] = (line[i] + b) & 255
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append([tuple(line[x * channels:x * channels + 3]) for x in range(width)])
        previous = line
    return width, height, rows


def near(pixel, colour):
    return all(abs(p - c) <= TOLERANCE for p, c in zip(pixel, colour))


def hex_colour(text):
    return tuple(int(text[i:i + 2], 16) for i in (1, 3, 5))


def frames(width, height, rows):
    """Top-left corners of the plot frames: a frame-coloured run of about
    FRAME_WIDTH pixels with another one FRAME_HEIGHT rows below it."""
    runs = set()
    for y in range(height):
        row, x = rows[y], 0
        while x < width:
            if near(row[x], FRAME):
                start = x
                while x < width and near(row[x], FRAME):
                    x += 1
                if abs((x - start) - FRAME_WIDTH) <= 3:
                    runs.add((start, y))
            else:
                x += 1
    found = []
    for (x, y) in sorted(runs, key=lambda r: (r[1], r[0])):
        if any((x + dx, y + dy) in runs for dx in (-1, 0, 1) for dy in range(FRAME_HEIGHT - 2, FRAME_HEIGHT + 3)):
            found.append((x, y))
    return found


def main():
    kvtier, work = sys.argv[1], sys.argv[2]
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if not browser:
        print("SKIP: no chromium or chromium-browser on PATH (Debian package chromium; scripts/setup.sh installs it)")
        return 77
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    spec = os.path.join(work, "shot.toml")
    open(spec, "w").write(SPEC)
    out = os.path.join(work, "out")
    run = subprocess.run([kvtier, "experiment", spec, "-o", out, "-j", "2"], capture_output=True, text=True)
    if run.returncode != 0:
        fail("kvtier experiment: " + run.stdout + run.stderr)
    html = open(os.path.join(out, "report.html")).read()
    plots = html.count('<g class="plot"')
    if plots < 8:
        fail("expected at least 8 plots in the report, found %d" % plots)
    shot = os.path.join(work, "report.png")
    subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    "--force-device-scale-factor=1", "--window-size=1360,2600", "--screenshot=" + shot,
                    "file://" + os.path.abspath(os.path.join(out, "report.html"))],
                   capture_output=True, text=True, timeout=120)
    if not os.path.exists(shot):
        fail("chromium wrote no screenshot")
    width, height, rows = read_png(shot)
    found = frames(width, height, rows)
    if len(found) != plots:
        fail("the report has %d plots; the screenshot shows %d frames at %s" % (plots, len(found), found))
    palette = [hex_colour(c) for c in PALETTE]
    for n, (x0, y0) in enumerate(found):
        counts = [0] * len(palette)
        for y in range(y0 + 1, min(height, y0 + FRAME_HEIGHT)):
            for x in range(x0 + 1, min(width, x0 + FRAME_WIDTH)):
                for i, colour in enumerate(palette):
                    if near(rows[y][x], colour):
                        counts[i] += 1
        if sum(counts) < 20:
            fail("plot %d (frame at %d,%d) has no drawn line or bar: palette pixels %s" % (n, x0, y0, counts))
        if n == 0 and (counts[0] < 20 or counts[1] < 20):
            fail("the TTFT CDF must show both points' lines: palette pixels %s" % counts)
    print("report in chromium: %d plots, each with its lines or bars (%dx%d screenshot)" % (plots, width, height))
    return 0


if __name__ == "__main__":
    sys.exit(main())
