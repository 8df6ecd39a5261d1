#!/usr/bin/env python3
"""What the default debug build costs: the 8-thread ring of tests/c/hc_threads.c under
build/libhcmalloc-debug.so (HC_DEBUG=1: per-call checks, a whole-heap walk every N calls)
against build/libhcmalloc.so, interleaved runs, medians (docs/allocator.md, "The debug build").

A ratio of wall times on a shared machine is a benchmark, not a correctness check, so it lives
here; tests/test_allocator_debug.py keeps what the debug build must catch. The bound the test
used to assert is checked and printed: debug within 10x of release (exit 1 when not).

    .venv/bin/python bench/debug_overhead.py [--runs 3] [--items 100000]
(after make)
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from hctune import paths

ROOT = Path(__file__).resolve().parents[1]


def timed(program: Path, args: list[str], library: Path) -> float:
    env = dict(os.environ, LD_PRELOAD=str(library))
    start = time.perf_counter()
    res = subprocess.run([str(program), *args], capture_output=True, text=True, timeout=600,
                         env=env)
    took = time.perf_counter() - start
    if res.returncode != 0:
        raise SystemExit(f"{program.name} {' '.join(args)} failed: {res.stderr[-500:]}")
    return took


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--items", type=int, default=100_000, help="per thread (8 threads)")
    a = ap.parse_args(argv)
    print(f"# .venv/bin/python bench/debug_overhead.py --runs {a.runs} --items {a.items}")
    release, debug = paths.BUILD / "libhcmalloc.so", paths.BUILD / "libhcmalloc-debug.so"
    with tempfile.TemporaryDirectory(prefix="hctune-debug-") as tmp:
        program = Path(tmp) / "hc_threads"
        subprocess.run(["cc", "-O2", "-g", "-std=gnu11", "-pthread", f"-I{ROOT / 'tests/c'}",
                        str(ROOT / "tests/c/hc_threads.c"), "-o", str(program)], check=True)
        args = ["ring", str(a.items)]
        rel, dbg = [], []
        for _ in range(a.runs):             # interleaved, medians: the machine is shared
            rel.append(timed(program, args, release))
            dbg.append(timed(program, args, debug))
    ratio = statistics.median(dbg) / statistics.median(rel)
    print(f"release {statistics.median(rel):.2f} s (runs {min(rel):.2f}–{max(rel):.2f}), "
          f"debug {statistics.median(dbg):.2f} s (runs {min(dbg):.2f}–{max(dbg):.2f}): "
          f"{ratio:.1f}x (bound 10x)")
    return 0 if ratio < 10 else 1


if __name__ == "__main__":
    sys.exit(main())
