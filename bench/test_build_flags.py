#!/usr/bin/env python3
"""What one HC test build costs with each set of compiler flags (tests/conftest.py's choice).

    PYTHONPATH=tuner .venv/bin/python bench/test_build_flags.py [--rounds 3] [--settings 4]

The test suite compiles ~150 HC libraries on a clean clone (the stress, pages and thread-cache
matrices; HCTUNE_TEST_COMPILE_LOG=<file> lists them). This renders --settings settings of the
stress matrix (generic with QL_HIGH and the four coalescing policies varied), release and debug,
and compiles each with every candidate flag set, interleaved (round r of every pair before round
r+1 of any), timing the compiler's CPU (user + sys of the child, from wait4: steadier than wall
time on a shared machine). Then it runs tests/c/hc_stress.c's debug-checked run (the debug
matrix's: 30,000 calls on 400 slots, HCMALLOC_CHECK=1) on each debug library, since a faster
compile that runs slower would not be a saving. Prints a Markdown table with medians and
spreads (min-max) and the command that made it.
"""

from __future__ import annotations

import argparse
import itertools
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tuner"))

from hctune import build, knobs  # noqa: E402
from hctune.render import render_malloc  # noqa: E402

CANDIDATES = {
    "release": {"-O2 -g (before)": [*build.CFLAGS, "-g"], "-O2 (the search's recipe)": list(build.CFLAGS)},
    "debug": {"-O1 -g (before)": list(build.DEBUG_CFLAGS),
              "-Og -g": ["-Og", "-g", *build.DEBUG_CFLAGS[2:]],
              "-Og": ["-Og", *build.DEBUG_CFLAGS[2:]],
              "-O0": ["-O0", *build.DEBUG_CFLAGS[2:]]},
}


def cpu_of(cmd: list[str], **kw) -> float:
    """user + sys seconds of `cmd` (its children included, from wait4)."""
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, **kw)
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise SystemExit(f"failed ({p.returncode}): {shlex.join(cmd)}")
    return ru.ru_utime + ru.ru_stime


def spread(xs: list[float]) -> str:
    return f"{statistics.median(xs):.2f} s ({min(xs):.2f}-{max(xs):.2f})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--settings", type=int, default=4)
    a = ap.parse_args()
    cc = build.compiler()
    policies = ["SPLIT", "COALESCE", "COALESCE_QL", "COALESCE_IN_FREE"]
    combos = list(itertools.product((16, 72, 256, 1016), itertools.product((0, 1), repeat=4)))
    step = max(1, len(combos) // a.settings)
    settings = [knobs.complete(dict(knobs.preset("generic"), QL_HIGH=ql, **dict(zip(policies, bits))))
                for ql, bits in combos[::step][:a.settings]]
    compile_cpu: dict[tuple[str, str], list[float]] = {}
    run_cpu: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="hctune-flags-") as tmp:
        tmp = Path(tmp)
        stress = tmp / "hc_stress"
        subprocess.run([cc, "-O2", "-std=gnu11", "-pthread", "-I", str(ROOT / "tests" / "c"),
                        str(ROOT / "tests" / "c" / "hc_stress.c"), "-o", str(stress)], check=True)
        sources = {}
        for i, s in enumerate(settings):
            for kind in ("release", "debug"):
                src = tmp / f"{kind}{i}.c"
                src.write_text(render_malloc(s, debug=kind == "debug"))
                sources[kind, i] = src
        for r in range(a.rounds):
            for (kind, i), src in sources.items():
                for label, flags in CANDIDATES[kind].items():
                    out = tmp / f"{kind}{i}-{label.split()[0]}.so"
                    t = cpu_of([cc, *flags, "-o", str(out), str(src)])
                    compile_cpu.setdefault((kind, label), []).append(t)
                    if kind == "debug":
                        env = dict(os.environ, LD_PRELOAD=str(out), HCMALLOC_CHECK="1")
                        run_cpu.setdefault(label, []).append(
                            cpu_of([str(stress), "30000", str(i + 1), "400"], env=env))
    print(f"HC test builds: compiler CPU per library and debug-checked stress CPU, medians "
          f"(min-max) of {a.rounds} rounds x {len(settings)} settings; {cc} "
          f"({build.compiler_identity(cc)}), {os.cpu_count()} cores, {platform.machine()}\n")
    print("| build | flags | compile CPU | stress run CPU (debug) |")
    print("|---|---|---|---|")
    for (kind, label), xs in compile_cpu.items():
        run = spread(run_cpu[label]) if kind == "debug" else ""
        print(f"| {kind} | {label} | {spread(xs)} | {run} |")
    print(f"\nCommand: PYTHONPATH=tuner {Path(sys.executable).name} bench/test_build_flags.py "
          f"--rounds {a.rounds} --settings {a.settings}")


if __name__ == "__main__":
    main()
