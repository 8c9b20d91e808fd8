#!/usr/bin/env python3
"""kvtier experiment's report in headless Chromium: a screenshot must hold
every plot's frame (the #999999 rectangle each SVG plot draws around its
area) and, inside each frame, pixels of the palette's colours: the lines
and bars were drawn, not just the page loaded.

    report_screenshot_test.py path/to/kvtier WORK_DIR
Exit 77 (skipped) when no chromium is installed (Debian package chromium) or
the interpreter lacks Pillow and numpy (python3-pil, python3-numpy).
"""
import os
import shutil
import signal
import subprocess
import sys

try:
    import numpy
    from PIL import Image
except ImportError:
    numpy = Image = None

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


def read_screenshot(path):
    """The screenshot as an (height, width, 3) uint8 array (Pillow, Debian's python3-pil)."""
    with Image.open(path) as image:
        return numpy.asarray(image.convert("RGB")).astype(numpy.int16)


def near(pixels, colour):
    """Where pixels ([..., 3]) are within TOLERANCE of colour, per channel."""
    return numpy.all(numpy.abs(pixels - numpy.array(colour, dtype=numpy.int16)) <= TOLERANCE, axis=-1)


def hex_colour(text):
    return tuple(int(text[i:i + 2], 16) for i in (1, 3, 5))


def frames(pixels):
    """Top-left corners of the plot frames: a frame-coloured run of about
    FRAME_WIDTH pixels with another one FRAME_HEIGHT rows below it."""
    mask = near(pixels, FRAME)
    runs = set()
    for y in numpy.nonzero(mask.sum(axis=1) >= FRAME_WIDTH - 3)[0]:
        edges = numpy.diff(numpy.concatenate(([0], mask[y].astype(numpy.int8), [0])))
        for start, end in zip(numpy.nonzero(edges == 1)[0], numpy.nonzero(edges == -1)[0]):
            if abs((end - start) - FRAME_WIDTH) <= 3:
                runs.add((int(start), int(y)))
    found = []
    for (x, y) in sorted(runs, key=lambda r: (r[1], r[0])):
        if any((x + dx, y + dy) in runs for dx in (-1, 0, 1) for dy in range(FRAME_HEIGHT - 2, FRAME_HEIGHT + 3)):
            found.append((x, y))
    return found


def take_screenshot(browser, url, shot, work, attempt):
    """One headless Chromium run writing `shot`; False when it had to be
    killed. Chromium's helper processes outlive a killed main process and
    would hold a pipe open, so its output goes to a file and the whole process
    group is killed: a browser that stalls can never stall the test."""
    log_path = os.path.join(work, "chromium-%d.log" % attempt)
    profile = os.path.join(work, "profile-%d" % attempt)  # never the user's own, never one a stalled run left
    with open(log_path, "w") as log:
        browser_run = subprocess.Popen(
            [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
             "--no-default-browser-check", "--disable-extensions", "--user-data-dir=" + profile,
             "--force-device-scale-factor=1", "--window-size=1360,4200", "--screenshot=" + shot, url],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            browser_run.wait(timeout=60)
            return True
        except subprocess.TimeoutExpired:
            os.killpg(browser_run.pid, signal.SIGKILL)
            browser_run.wait()
    print("chromium ran past 60 s on try %d and was killed; its output:\n%s" % (attempt, open(log_path).read()[-2000:]))
    return False


def main():
    kvtier, work = sys.argv[1], sys.argv[2]
    if Image is None:
        print("SKIP: no Pillow or numpy for this interpreter (Debian packages python3-pil, python3-numpy)")
        return 77
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if not browser:
        print("SKIP: no chromium or chromium-browser on PATH (Debian package chromium; scripts/setup.sh installs it)")
        return 77
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    spec = os.path.join(work, "shot.toml")
    open(spec, "w").write(SPEC)
    out = os.path.join(work, "out")
    run = subprocess.run([kvtier, "experiment", spec, "-o", out, "-j", "2"], capture_output=True, text=True,
                         timeout=240)
    if run.returncode != 0:
        fail("kvtier experiment: " + run.stdout + run.stderr)
    html = open(os.path.join(out, "report.html")).read()
    plots = html.count('<g class="plot"')
    if plots < 8:
        fail("expected at least 8 plots in the report, found %d" % plots)
    # Tall enough for every plot of this report: frames below the window are not drawn.
    shot = os.path.join(work, "report.png")
    url = "file://" + os.path.abspath(os.path.join(out, "report.html"))
    for attempt in (1, 2):
        if take_screenshot(browser, url, shot, work, attempt):
            break
    if not os.path.exists(shot):
        fail("chromium wrote no screenshot")
    pixels = read_screenshot(shot)
    height, width = pixels.shape[:2]
    found = frames(pixels)
    if len(found) != plots:
        fail("the report has %d plots; the screenshot shows %d frames at %s" % (plots, len(found), found))
    for n, (x0, y0) in enumerate(found):
        inside = pixels[y0 + 1:y0 + FRAME_HEIGHT, x0 + 1:x0 + FRAME_WIDTH]
        counts = [int(near(inside, hex_colour(c)).sum()) for c in PALETTE]
        if sum(counts) < 20:
            fail("plot %d (frame at %d,%d) has no drawn line or bar: palette pixels %s" % (n, x0, y0, counts))
        if n == 0 and (counts[0] < 20 or counts[1] < 20):
            fail("the TTFT CDF must show both points' lines: palette pixels %s" % counts)
    print("report in chromium: %d plots, each with its lines or bars (%dx%d screenshot)" % (plots, width, height))
    return 0


if __name__ == "__main__":
    sys.exit(main())
