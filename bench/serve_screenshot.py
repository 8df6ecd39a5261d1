#!/usr/bin/env python3
"""The pictures of the service in the README and docs/serve.md, made from a real run: gawk
counting words is profiled into a fresh results database (bench/screenshot_setup.py), `hctune
serve --workers 1` tunes it across HC and every other allocator installed, for footprint and
speed at once (objective pareto; with the comparison and a validation by real runs), and
Debian's chromium, driven by Playwright, takes the finished study's page:

- docs/serve.png: the top (the best, the downloads, the Pareto front of the trials);
- docs/serve-views.png: Optuna's views, the other allocators and the real runs;
- docs/serve-trials.png: the trial table, filtered to the Pareto front, sorted by footprint;
- docs/serve-answer.png: the study's one answer, worded as `hctune best` words it, and its files;
- docs/serve-trial.png: one trial's page (what it changes from generic, its whole setting).

    .venv/bin/python bench/serve_screenshot.py [--out-dir docs] [--trials 40]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from screenshot_setup import chromium, profiled_gawk  # noqa: E402

WIDTH = 1100


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def call(base: str, path: str, body: dict | None = None) -> dict:
    req = urllib.request.Request(base + path, data=json.dumps(body).encode() if body else None,
                                 headers={"Content-Type": "application/json"} if body else {})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out-dir", default="docs")
    ap.add_argument("--trials", type=int, default=40)
    a = ap.parse_args()
    print(f"command: .venv/bin/python bench/serve_screenshot.py --out-dir {a.out_dir} "
          f"--trials {a.trials}", file=sys.stderr)
    from hctune.search.study import default_allocators
    allocs = list(default_allocators())
    out = Path(a.out_dir)
    with profiled_gawk("hctune-shot-") as (work, db):
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        srv = subprocess.Popen([sys.executable, "-m", "hctune", "--db", str(db), "serve",
                                "--port", str(port), "--workers", "1"],
                               stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            for _ in range(100):
                try:
                    call(base, "/api/traces")
                    break
                except OSError:
                    time.sleep(0.2)
            call(base, "/api/studies", {"traces": [1], "objective": "pareto",
                                        "name": "gawk-words", "trials": a.trials,
                                        "allocators": allocs, "compare_rounds": 3,
                                        "validate_runs": 5})
            started = time.monotonic()
            while (s := call(base, "/api/studies/gawk-words?trials=false"))["state"] not in (
                    "done", "failed", "cancelled"):
                time.sleep(1)
            print(f"study {s['state']} in {time.monotonic() - started:.0f} s "
                  f"(allocators: {', '.join(allocs)})", file=sys.stderr)
            with chromium() as browser:
                # (Playwright's polling predicates are eval'd in the page: past the CSP)
                page = browser.new_page(viewport={"width": WIDTH, "height": 900}, bypass_csp=True)
                page.goto(base + "/studies/gawk-words", wait_until="domcontentloaded")
                page.wait_for_function("document.querySelector('#validation table') !== null "
                                       "&& document.querySelector('#pareto circle.front')",
                                       timeout=30000)
                for k in ("history", "importance", "parallel"):
                    try:
                        urllib.request.urlopen(f"{base}/api/studies/gawk-words/views/{k}.svg",
                                               timeout=120).read()
                    except urllib.error.HTTPError as e:
                        raise SystemExit(f"serve_screenshot: the {k} view: {e.code} "
                                         f"{e.read().decode()}") from None
                    page.wait_for_function(f"document.getElementById('view-{k}')"
                                           ".naturalWidth > 0", timeout=60000)
                bottom = page.evaluate("document.getElementById('front-section')"
                                       ".getBoundingClientRect().bottom + window.scrollY")
                page.screenshot(path=str(out / "serve.png"), full_page=True,
                                clip={"x": 0, "y": 0, "width": WIDTH, "height": bottom + 8})
                page.locator("#views-section").screenshot(path=str(out / "serve-views.png"))
                page.check("#filter input[name=front]")
                page.click("#trials th[data-key=mem_ratio]")
                page.wait_for_function("document.querySelector('#trials th[data-key=mem_ratio]')"
                                       ".textContent.endsWith('▲')")
                page.locator("#trials-section").screenshot(path=str(out / "serve-trials.png"))
                page.wait_for_function("document.getElementById('answer').textContent"
                                       ".includes('chosen by')", timeout=30000)
                top = page.evaluate("document.getElementById('best')"
                                    ".getBoundingClientRect().top + window.scrollY")
                bottom = page.evaluate("document.getElementById('dl-csv')"
                                       ".getBoundingClientRect().bottom + window.scrollY")
                page.screenshot(path=str(out / "serve-answer.png"), full_page=True,
                                clip={"x": 0, "y": top - 40, "width": WIDTH,
                                      "height": bottom - top + 56})
                page.click("#trials tbody tr:first-child a[href*='/trials/']")
                page.wait_for_url("**/trials/*")
                page.screenshot(path=str(out / "serve-trial.png"), full_page=True)
        finally:
            os.killpg(srv.pid, 15)
            srv.wait(timeout=30)
    print(f"wrote {out / 'serve.png'}, {out / 'serve-views.png'}, {out / 'serve-trials.png'}, "
          f"{out / 'serve-answer.png'}, {out / 'serve-trial.png'}", file=sys.stderr)
    return 0 if s["state"] == "done" else 1


if __name__ == "__main__":
    sys.exit(main())
