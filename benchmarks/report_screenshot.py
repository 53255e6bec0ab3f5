"""Render a run's report.html to PNG in a real headless browser, to look at the page as a reader would.

    python benchmarks/report_screenshot.py RUN_DIR_OR_REPORT_HTML [-o out.png] [--width 1200] [--height 6000]

Uses Chromium's own ``--headless --screenshot`` (Debian: ``apt-get install -y chromium``); no test depends on it.
The page is self-contained, so Chromium is also started with the network off (``--proxy-server`` to a closed port):
a report that tried to load anything from outside would show it broken. The screenshot is of a fixed window
(``--height``): the page below it is cut, the page shorter than it leaves white space.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_browser() -> str:
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    raise SystemExit(f"no headless browser found (tried {', '.join(BROWSERS)}); on Debian: apt-get install -y chromium")


def screenshot(report: Path, out: Path, width: int, height: int, timeout_s: float = 120.0) -> None:
    browser = find_browser()
    with tempfile.TemporaryDirectory(prefix="cudaperf-shot-") as profile:
        cmd = [browser, "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
               "--no-first-run", "--disable-extensions", f"--user-data-dir={profile}",
               "--proxy-server=127.0.0.1:9", "--proxy-bypass-list=<-loopback>",
               f"--window-size={width},{height}", f"--screenshot={out}", report.resolve().as_uri()]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    if proc.returncode != 0 or not out.is_file():
        raise SystemExit(f"{browser} failed (rc {proc.returncode}):\n{proc.stderr[-2000:]}")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("target", type=Path, help="a run directory (its report.html) or a report.html")
    ap.add_argument("-o", "--out", type=Path, help="PNG to write (default: report.png beside the report)")
    ap.add_argument("--width", type=int, default=1200)
    ap.add_argument("--height", type=int, default=6000)
    args = ap.parse_args(argv)
    report = args.target / "report.html" if args.target.is_dir() else args.target
    if not report.is_file():
        raise SystemExit(f"{report}: no such report (run `cudaperf report RUN_DIR` first)")
    out = args.out or report.with_name("report.png")
    screenshot(report, out, args.width, args.height)
    print(out)


if __name__ == "__main__":
    sys.exit(main())
