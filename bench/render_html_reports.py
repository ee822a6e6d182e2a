#!/usr/bin/env python3
"""Renders every command's --html report in headless Chromium (issue 16's measurement).

    bench/render_html_reports.py NUMPROBE_BINARY [WORKDIR]

For each command of bench/json_diff_commands.py, writes --html, loads it in headless Chromium
(--dump-dom runs the page's self-check script) and prints whether it rendered, how many plots it
holds and how many marks they drew (the page counts them itself: data-plots, data-marks,
data-empty-plots). Exit 1 when a page did not render or a plot drew nothing.
"""
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from json_diff_commands import commands, make_inputs  # noqa: E402


def main():
    binary = sys.argv[1]
    work = sys.argv[2] if len(sys.argv) > 2 else "/tmp/numprobe_html_render"
    os.makedirs(work, exist_ok=True)
    make_inputs(work)
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if not browser:
        print("no chromium on PATH")
        return 2
    bad = 0
    for name, args in commands(work):
        html = os.path.join(work, f"{name}.html")
        subprocess.run(f"{binary} {args} --html {html}", shell=True, capture_output=True)
        dom = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom",
                              "file://" + html], capture_output=True, text=True, timeout=60).stdout
        body = re.search(r"<body[^>]*>", dom)
        attrs = dict(re.findall(r'data-([a-z-]+)="([^"]*)"', body.group(0))) if body else {}
        ok = attrs.get("rendered") == "ok" and attrs.get("empty-plots", "0") == "0"
        bad += not ok
        print(f"{name:<20} rendered {attrs.get('rendered', 'NO'):<3} plots {attrs.get('plots', '?'):>2} "
              f"marks {attrs.get('marks', '?'):>5} empty plots {attrs.get('empty-plots', '?')}  "
              f"{os.path.getsize(html) if os.path.exists(html) else 0} bytes")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
