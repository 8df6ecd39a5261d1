#!/usr/bin/env python3
"""HC's small blocks on pages (allocator/hc/hc_page.c, SMALL_MAX) against the other allocators.

    .venv/bin/python bench/small_pages.py [--reps 5] [--rounds 400000] [--skip-callgrind]

1. Instructions per malloc/free pair (callgrind, deterministic): bench/pair_loop.c replaces one of
   64 live blocks per pair, run for N and 3N pairs; the difference over 2N is the pair's cost
   (the loop's own ~17 instructions included, the same for every allocator).  One thread, and
   two threads (each its own blocks).
2. The word-table program of issue 17 (bench/wordtable.c: 24-byte nodes and 4..13-byte words in
   a hash table, next to 500 buffers of 1..64 KiB reallocated at random): wall time and peak RSS
   (GNU time's %M), --reps runs of every allocator interleaved, median and range; one thread and
   two (each thread its own table).
Allocators: glibc, jemalloc, mimalloc, tcmalloc (Debian's libraries), HC generic with the pages
(SMALL_MAX=1024) and without (SMALL_MAX=0).  Prints Markdown with the command that made it.
"""

from __future__ import annotations

import argparse
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from hctune import allocators as system_allocators
from hctune import knobs
from hctune.render import render_malloc

ROOT = Path(__file__).resolve().parent.parent


def build(work: Path) -> tuple[dict[str, str | None], Path, Path]:
    def cc(out, *args):
        subprocess.run(["cc", "-O2", "-g", "-pthread", *map(str, args), "-o", str(out)], check=True)
    allocators: dict[str, str | None] = {"glibc": None}
    for name, lib in system_allocators.installed().items():
        allocators[name] = str(lib)
    for label, small in (("HC pages", 1024), ("HC no pages", 0)):
        src = work / f"hc{small}.c"
        setting = knobs.resolve("generic", [f"SMALL_MAX={small}"])
        src.write_text(render_malloc(setting))
        lib = work / f"libhc{small}.so"
        cc(lib, "-fPIC", "-shared", src)
        allocators[label] = str(lib)
    pair, table = work / "pair_loop", work / "wordtable"
    cc(pair, ROOT / "bench" / "pair_loop.c")
    cc(table, ROOT / "bench" / "wordtable.c")
    return allocators, pair, table


def env_of(lib: str | None) -> list[str]:
    return ["env", f"LD_PRELOAD={lib}"] if lib else ["env"]


def instructions(lib, argv) -> int:
    # valgrind runs the program itself (LD_PRELOAD through env would measure env too)
    res = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
                          *map(str, argv)], capture_output=True, text=True,
                         env={"LD_PRELOAD": lib or "", "PATH": "/usr/bin:/bin"})
    m = re.search(r"Collected : (\d+)", res.stderr)
    if res.returncode != 0 or not m:
        raise SystemExit(f"callgrind failed: {res.stderr[-500:]}")
    return int(m.group(1))


def per_pair(lib, pair, size, threads, cross, n=100_000) -> float:
    lo = instructions(lib, [pair, n, size, threads, cross])
    hi = instructions(lib, [pair, 3 * n, size, threads, cross])
    pairs = 2 * n * (threads if not cross else 1)
    return (hi - lo) / pairs


def timed(lib, argv) -> tuple[float, int, str]:
    with tempfile.NamedTemporaryFile("r") as f:
        res = subprocess.run(["/usr/bin/time", "-f", "%e %M", "-o", f.name, *env_of(lib),
                              *map(str, argv)], capture_output=True, text=True)
        if res.returncode != 0:
            raise SystemExit(f"{argv} failed under {lib}: {res.stderr[-500:]}")
        wall, rss = f.read().split()[-2:]
    return float(wall), int(rss), res.stdout


def spread(values, fmt) -> str:
    return f"{fmt(statistics.median(values))} ({fmt(min(values))}–{fmt(max(values))})"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=400_000)
    ap.add_argument("--skip-callgrind", action="store_true")
    a = ap.parse_args(argv)
    cmd = "python bench/small_pages.py " + shlex.join(sys.argv[1:] if argv is None else argv)
    print(f"<!-- {cmd.strip()} -->")
    with tempfile.TemporaryDirectory() as tmp:
        allocators, pair, table = build(Path(tmp))
        names = list(allocators)
        if not a.skip_callgrind:
            # (The producer -> consumer mode of pair_loop spins on its ring: under callgrind,
            # which runs one thread at a time, its count depends on the scheduling, so it is
            # timed by bench/mt_bench.py's shapes instead of counted here.)
            shapes = [("16 B, 1 thread", 16, 1, 0), ("64 B, 1 thread", 64, 1, 0),
                      ("256 B, 1 thread", 256, 1, 0), ("16 B, 2 threads", 16, 2, 0)]
            print("\nInstructions per malloc/free pair (callgrind; the loop's ~17 included):\n")
            print("| shape | " + " | ".join(names) + " |")
            print("|---|" + "---:|" * len(names))
            for label, size, threads, cross in shapes:
                row = [f"{per_pair(allocators[n], pair, size, threads, cross):.0f}" for n in names]
                print(f"| {label} | " + " | ".join(row) + " |")
        for threads in (1, 2):
            walls = {n: [] for n in names}
            rss = {n: [] for n in names}
            outputs = set()
            for _ in range(a.reps):
                for n in names:  # interleaved: round r of every allocator before round r+1
                    w, r, out = timed(allocators[n], [table, a.rounds, threads])
                    walls[n].append(w)
                    rss[n].append(r)
                    outputs.add(out)
            assert len(outputs) == 1, "the allocators disagree on the program's output"
            print(f"\nWord table, {a.rounds} rounds, {threads} thread(s), {a.reps} runs each "
                  "interleaved: median (min–max)\n")
            print("| allocator | wall s | peak RSS MiB |")
            print("|---|---:|---:|")
            for n in names:
                print(f"| {n} | {spread(walls[n], lambda v: f'{v:.2f}')} | "
                      f"{spread(rss[n], lambda v: f'{v / 1024:.1f}')} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
