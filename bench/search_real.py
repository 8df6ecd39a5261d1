#!/usr/bin/env python3
"""Run a real program under each allocator (LD_PRELOAD) and compare wall time and peak RSS.

    .venv/bin/python bench/search_real.py [--lib NAME=PATH ...] [--runs 3] [--expect FILE] \
        -- PROGRAM ARGS...

glibc, jemalloc, mimalloc and tcmalloc (the Debian packages) plus every --lib (e.g. the .so
that `hctune emit --so` wrote), in interleaved rounds, measured by the same code as
`hctune validate` (hctune.validate.run_rounds: the program's own wall time, CPU time and peak
RSS through the small hcrun launcher). Medians; ratios to glibc with 95 % intervals (paired
bootstrap over rounds). With --expect, every run's output must equal that file (else glibc's
output is the reference), so a faster allocator that breaks the program cannot win.
`hctune validate` does the same for a study's settings and stores the runs; this script is for
libraries that are not in a study.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shlex
import sys

from hctune import allocators
from hctune import validate as v
from hctune.errors import HctuneError


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lib", action="append", default=[], metavar="NAME=PATH")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--expect", default=None)
    ap.add_argument("--out", default=None, help="unused; kept for the demo's symmetry")
    ap.add_argument("program", nargs=argparse.REMAINDER)
    a = ap.parse_args(argv)
    prog = a.program[1:] if a.program[:1] == ["--"] else a.program
    if not prog:
        ap.error("name the program to run after --")
    cands = [v.Candidate("glibc", "reference", "glibc")]
    for name in v.REFERENCES:
        try:
            cands.append(v.Candidate(name, "reference", name,
                                     library=allocators.resolve(name).library))
        except HctuneError as e:
            print(f"skipping {name}: {e}", file=sys.stderr)
    for item in a.lib:
        name, _, path = item.partition("=")
        cands.append(v.Candidate(name, "extra", os.path.abspath(path),
                                 library=os.path.abspath(path)))
    expected = None
    if a.expect:
        with open(a.expect, "rb") as f:
            expected = hashlib.sha256(f.read()).hexdigest()
    try:
        program = v.check_program(v.Program(prog, os.getcwd()))
        runs, _, notes = v.run_rounds(program, cands, a.runs, expected_sha256=expected)
    except HctuneError as e:
        print(f"search_real: error: {e}", file=sys.stderr)
        return 2
    s = v.summarize(cands, runs, "perf")
    bad = [c for c in s["candidates"] if c["disqualified"]]
    for c in bad:
        print(f"{c['candidate']}: disqualified: {c['disqualified']}", file=sys.stderr)
    print(f"{'allocator':16} {'wall s':>8} {'vs glibc (95 % CI)':>22} {'peak RSS KiB':>12} "
          f"{'vs glibc (95 % CI)':>22}")
    for c in s["candidates"]:
        if c["disqualified"]:
            continue
        cells = []
        for m in ("wall_s", "peak_rss_bytes"):
            r = c["vs_glibc"].get(m)
            cells.append(f"{r['ratio']:.3f} ({r['ci'][0]:.3f}-{r['ci'][1]:.3f})" if r else "1")
        print(f"{c['candidate']:16} {c['median']['wall_s']:8.3f} {cells[0]:>22} "
              f"{c['median']['peak_rss_bytes'] / 1024:12.0f} {cells[1]:>22}")
    for n in notes:
        print(f"note: {n}", file=sys.stderr)
    print(f"# {a.runs} interleaved runs each, output checked against "
          f"{a.expect or 'glibc'}; reproduce: .venv/bin/python bench/search_real.py "
          + " ".join(f"--lib {shlex.quote(x)}" for x in a.lib) + f" --runs {a.runs} -- "
          + shlex.join(prog), file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
