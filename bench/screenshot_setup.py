"""What bench/serve_screenshot.py and bench/report_screenshot.py share: a fresh results
database holding a real profile (gawk counting the words of a generated text), `hctune` run on
it, and Debian's chromium driven by Playwright (its driver ships in the pip package; no browser
is downloaded)."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

CHROMIUM = os.environ.get("HCTUNE_CHROMIUM", "/usr/bin/chromium")
WORDS = "the quick brown fox jumps over the lazy dog and runs far away from here".split()
GAWK_WORDS = "{ for (i = 1; i <= NF; i++) n[$i]++ } END { for (w in n) s += n[w]; print s }"


def hctune(db: Path, *args, cwd=None):
    """`hctune --db DB ARGS...`, its output dropped; CalledProcessError when it fails."""
    subprocess.run([sys.executable, "-m", "hctune", "--db", str(db), *map(str, args)],
                   check=True, cwd=cwd, stdout=subprocess.DEVNULL)


@contextlib.contextmanager
def profiled_gawk(prefix: str):
    """(work directory, results database) holding one profile, trace #1: gawk counting the
    words of a 20,000-line text; the directory is removed afterwards."""
    work = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        words = work / "words.txt"
        words.write_text("\n".join(" ".join(WORDS[(i * 7 + j) % len(WORDS)] + str(i % 997)
                                            for j in range(12)) for i in range(20000)) + "\n")
        db = work / "hctune.db"
        hctune(db, "profile", "-o", work / "gawk.trace", shutil.which("gawk"), GAWK_WORDS,
               words, cwd=work)
        yield work, db
    finally:
        shutil.rmtree(work, ignore_errors=True)


@contextlib.contextmanager
def chromium():
    """A headless chromium (Playwright's Browser)."""
    from playwright.sync_api import sync_playwright
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                     args=["--no-sandbox"])
        try:
            yield browser
        finally:
            browser.close()
