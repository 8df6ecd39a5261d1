#!/usr/bin/env python3
"""HC's generic preset with the small pages on (SMALL_MAX=4096, MID_CLASSES=16, SMALL_YIELD=1,
SMALL_IDLE=1) against Table 6 as printed (paper-generic, no pages) on real programs: peak RSS
and minor page faults.

    .venv/bin/python bench/generic_pages.py [--reps 5] [--scale 1]

Programs: the gawk, sqlite3 and python3 workloads of tests/workloads.py (python3 with
PYTHONMALLOC=malloc), plus gawk counting the words of 40,000 lines (tests/workloads.py's
GAWK_PROGRAM) and python3 on bench/headline_real.py's dict-and-set workload (--scale multiplies
the sizes of these two).  Runs are interleaved (every rep runs each program under both
presets, the order alternating), timed by /usr/bin/time (%M peak RSS, %R minor faults).  Prints
Markdown with medians and (min–max), and the command that made it.  Counts of faults are steadier
than times on a loaded machine; no times are printed.
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tuner"))
sys.path.insert(0, str(ROOT / "tests"))
from hctune import knobs  # noqa: E402
from hctune.render import render_malloc  # noqa: E402
from workloads import GAWK_PROGRAM, programs, python3, words_file  # noqa: E402  (the tests' workloads, said once)
from headline_real import PY_WORK  # noqa: E402  (bench/: this script's folder)

PRESETS = ("paper-generic", "generic")


def build(work: Path) -> dict[str, Path]:
    libs = {}
    for name in PRESETS:
        src = work / f"{name}.c"
        src.write_text(render_malloc(knobs.preset(name)))
        lib = work / f"lib{name}.so"
        subprocess.run(["cc", "-O2", "-g", "-pthread", "-fPIC", "-shared", str(src), "-o",
                        str(lib)], check=True)
        libs[name] = lib
    return libs


def measure(lib: Path, argv: list[str], extra: dict) -> tuple[int, int]:
    with tempfile.NamedTemporaryFile("r") as f:
        env = {"PATH": "/usr/bin:/bin", **extra, "LD_PRELOAD": str(lib)}
        res = subprocess.run(["/usr/bin/time", "-f", "%M %R", "-o", f.name, *argv],
                             capture_output=True, text=True, env=env, timeout=600)
        if res.returncode != 0:
            raise SystemExit(f"{argv[0]} failed under {lib.name}: {res.stderr[-500:]}")
        rss, faults = f.read().split()[-2:]
    return int(rss), int(faults)


def cell(values, fmt) -> str:
    return f"{fmt(statistics.median(values))} ({fmt(min(values))}–{fmt(max(values))})"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--scale", type=float, default=1.0)
    a = ap.parse_args(argv)
    if a.reps < 1 or a.scale <= 0:
        print("generic_pages.py: error: --reps and --scale must be positive", file=sys.stderr)
        return 2
    cmd = ".venv/bin/python bench/generic_pages.py " + shlex.join(sys.argv[1:] if argv is None
                                                                  else argv)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        libs = build(work)
        progs = programs(work)
        (work / "dicts.py").write_text(PY_WORK)
        words = words_file(work / "words.txt", int(40000 * a.scale))
        progs["gawk words"] = (["gawk", GAWK_PROGRAM, str(words)], {})
        progs["python3 dicts"] = ([python3(), str(work / "dicts.py"), "1",   # its random seed
                                   str(int(60000 * a.scale))],
                                  {"PYTHONMALLOC": "malloc", "PYTHONHASHSEED": "0"})
        got = {(p, n): [] for p in progs for n in PRESETS}
        for rep in range(a.reps):
            order = PRESETS if rep % 2 == 0 else PRESETS[::-1]
            for prog, (args, extra) in progs.items():
                for name in order:
                    got[prog, name].append(measure(libs[name], args, extra))
    print(f"<!-- {cmd.strip()} -->")
    print(f"Peak RSS (MiB) and minor page faults, median (min–max) of {a.reps} interleaved runs:\n")
    print("| program | RSS paper-generic | RSS generic (pages) | faults paper-generic "
          "| faults generic (pages) |")
    print("|---|---|---|---|---|")
    mib = lambda kib: f"{kib / 1024:.1f}"  # noqa: E731
    num = lambda n: f"{n:,.0f}"  # noqa: E731
    for prog in progs:
        row = [prog]
        for i, fmt in ((0, mib), (1, num)):
            row += [cell([r[i] for r in got[prog, n]], fmt) for n in PRESETS]
        print("| " + " | ".join(row) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
