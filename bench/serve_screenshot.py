#!/usr/bin/env python3
"""The README's picture of the service (docs/serve.png), made from a real run: gawk counting
words is profiled into a fresh results database, `hctune serve --workers 1` tunes it (with the
comparison and a validation by real runs), and Debian's chromium, driven by Playwright, takes
the finished study's page.

    .venv/bin/python bench/serve_screenshot.py [--out docs/serve.png] [--trials 24]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

CHROMIUM = os.environ.get("HCTUNE_CHROMIUM", "/usr/bin/chromium")
WORDS = "the quick brown fox jumps over the lazy dog and runs far away from here".split()


def hctune(db: Path, *args, cwd=None):
    subprocess.run([sys.executable, "-m", "hctune", "--db", str(db), *map(str, args)],
                   check=True, cwd=cwd, stdout=subprocess.DEVNULL)


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
    ap.add_argument("--out", default="docs/serve.png")
    ap.add_argument("--trials", type=int, default=24)
    a = ap.parse_args()
    print(f"command: .venv/bin/python bench/serve_screenshot.py --out {a.out} "
          f"--trials {a.trials}", file=sys.stderr)
    from playwright.sync_api import sync_playwright
    work = Path(tempfile.mkdtemp(prefix="hctune-shot-"))
    try:
        words = work / "words.txt"
        words.write_text("\n".join(" ".join(WORDS[(i * 7 + j) % len(WORDS)] + str(i % 997)
                                            for j in range(12)) for i in range(20000)) + "\n")
        db = work / "hctune.db"
        hctune(db, "profile", "-o", work / "gawk.trace", shutil.which("gawk"),
               "{ for (i = 1; i <= NF; i++) n[$i]++ } END { for (w in n) s += n[w]; print s }",
               words, cwd=work)
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
            call(base, "/api/studies", {"traces": [1], "objective": "mem", "name": "gawk-words",
                                        "trials": a.trials, "compare_rounds": 3,
                                        "validate_runs": 5})
            while call(base, "/api/studies/gawk-words?trials=false")["state"] not in (
                    "done", "failed"):
                time.sleep(1)
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                             args=["--no-sandbox"])
                page = browser.new_page(viewport={"width": 1100, "height": 1480})
                page.goto(base + "/studies/gawk-words")
                page.wait_for_function("document.querySelector('#validation table') !== null",
                                       timeout=30000)
                page.screenshot(path=a.out)   # the top: best, plot, others, real runs
                browser.close()
        finally:
            os.killpg(srv.pid, 15)
            srv.wait(timeout=30)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"wrote {a.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
