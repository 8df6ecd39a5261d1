#!/usr/bin/env python3
"""The README's picture of `hctune report` (docs/report.png), made from a real run: gawk
counting words is profiled into a fresh results database, searched (`--objective mem`),
validated by real runs, and the report is opened in Debian's chromium (driven by Playwright) at
1280 x 800: what a reader sees before scrolling. It also checks that the summary at the top of
the page (what to use, how much, how sure) fits in that first screen.

    .venv/bin/python bench/report_screenshot.py [--out docs/report.png] [--trials 16] [--runs 5]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from screenshot_setup import chromium, hctune, profiled_gawk  # noqa: E402

WIDTH, HEIGHT = 1280, 800


def summary_box(page_path: Path, shot: Path | None = None) -> dict:
    """The summary's box in a WIDTH x HEIGHT viewport (and a screenshot of that screen)."""
    with chromium() as browser:
        page = browser.new_page(viewport={"width": WIDTH, "height": HEIGHT})
        page.goto(page_path.resolve().as_uri())
        box = page.evaluate("(() => { const r = document.getElementById('summary')"
                            ".getBoundingClientRect(); return {top: r.top, bottom: r.bottom, "
                            "height: document.body.scrollHeight}; })()")
        if shot is not None:
            page.screenshot(path=str(shot))
    return box


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="docs/report.png")
    ap.add_argument("--trials", type=int, default=16)
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    print(f"command: .venv/bin/python bench/report_screenshot.py --out {a.out} "
          f"--trials {a.trials} --runs {a.runs}", file=sys.stderr)
    with profiled_gawk("hctune-report-") as (work, db):
        hctune(db, "search", "--objective", "mem", "--trials", a.trials, "--seed", 1,
               "--validate", "--validate-runs", a.runs, cwd=work)
        page = work / "report.html"
        hctune(db, "report", "-o", page, cwd=work)
        box = summary_box(page, Path(a.out))
    print(f"summary: top {box['top']:.0f} px, bottom {box['bottom']:.0f} px of a {HEIGHT} px "
          f"screen; page {box['height']} px tall", file=sys.stderr)
    print(f"wrote {a.out}", file=sys.stderr)
    return 0 if box["bottom"] <= HEIGHT else 1


if __name__ == "__main__":
    sys.exit(main())
