#!/usr/bin/env python3
"""Counts beside the perf headline's wall times: how much of a program's work is the
allocator's, and the instructions and page faults of each validated perf answer against the
fastest allocator as it comes.

    .venv/bin/python bench/xalloc_counts.py --share [--out bench-out/xalloc-share] [--scale 1]
        [--allocators glibc,jemalloc,mimalloc,hc] [PROGRAM ...]
    .venv/bin/python bench/xalloc_counts.py --out bench-out/xalloc-perf-long
        [--count-scale 1] [--fault-runs 3] [--validate-scale 16]

--share: every PROGRAM (those of bench/xalloc_headline.py) runs once under callgrind on input b
at --scale, on each allocator as it comes, and prints its instructions and the share executed
inside the allocator: for a preloaded library (jemalloc, mimalloc, tcmalloc, HC) every
instruction in that library; for glibc the instructions in its malloc functions (malloc, free,
calloc, realloc, the memalign family and their internals: _int_malloc, _int_free,
malloc_consolidate, sysmalloc, tcache_*, unlink_chunk, ...). Instructions only: the kernel's
page-fault time is not in it (the minor-fault counts below are). Deterministic; valgrind runs a
program ~50x slower, so keep --scale small (the share barely moves with the scale).

Without --share: reads <out>/xalloc-headline.json (written by `bench/xalloc_headline.py
--objectives perf`) and, per program, counts for the validated answer, the fastest allocator as
it comes (within the study's memory limit) and glibc: minor page faults (the median of
--fault-runs real runs on input b at --validate-scale, the headline's validation input) and
instructions (one callgrind run on input b at --count-scale, in <out>/count-s<scale>/). It
prints them beside the wall-time ratio and its paired 95 % interval.

The criterion for the perf goal (fixed and committed before the long-program run,
`xalloc_headline.py --out bench-out/xalloc-perf-long --trials 20 --runs 21 --scale 1
--validate-scale 20 --objectives perf perl gawk`, and python3 likewise at `--validate-scale 5`;
docs/allocators.md, "perf on long programs"): a program counts when validate's recommendation, chosen on the 21 interleaved
rounds on input b, has the paired-bootstrap 95 % interval of its wall time over the fastest
allocator as it comes (within the memory limit) entirely below 1 (xalloc_headline.py's
`significant`); an answer that is an allocator as it comes does not count. Reported beside it,
not part of the count: instructions and minor faults of the answer, the fastest as it comes and
glibc; a win where neither count is at least 2 % lower than the fastest as it comes' is marked
"no count moved" and is not believed. The load is logged beside the run; the pass is reported
as it comes out, no program rerun or dropped after it.
A benchmark, never a test.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import re
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("xalloc_headline",
                                               ROOT / "bench" / "xalloc_headline.py")
xh = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(xh)

from hctune import allocator_knobs, allocators, knobs  # noqa: E402
from hctune.errors import HctuneError  # noqa: E402
from hctune.validate.candidates import Candidate  # noqa: E402
from hctune.validate.launcher import hcrun  # noqa: E402
from hctune.validate.program import Program  # noqa: E402
from hctune.validate.runs import run_once  # noqa: E402

API = re.compile(r"malloc|free|cfree|calloc|realloc|reallocarray|memalign|valloc|pvalloc|"
                 r"posix_memalign|aligned_alloc|malloc_usable_size|_Znwm|_Znam|_ZdlPv\w*|"
                 r"_ZdaPv\w*|tc_\w+")
# glibc's malloc, by function (its internals are named in Debian's libc.so.6 symbols)
GLIBC_MALLOC = re.compile(
    r"(__libc_)?(malloc|free|cfree|calloc|realloc|reallocarray|memalign|valloc|pvalloc|"
    r"posix_memalign|aligned_alloc|malloc_usable_size|malloc_trim)"
    r"|_int_\w+|_mid_memalign|malloc_consolidate|sysmalloc\w*|systrim|unlink_chunk|tcache_\w+|"
    r"arena_\w+|ptmalloc_\w+|munmap_chunk|mremap_chunk|new_heap|grow_heap|shrink_heap|"
    r"heap_trim|alloc_perturb|__malloc_\w+")


def _named(rest: str, table: dict) -> str:
    """callgrind's name compression: `(12) name` defines id 12, `(12)` refers to it."""
    m = re.match(r"\((\d+)\)\s*(.*)", rest)
    if not m:
        return rest.strip()
    if m.group(2):
        table[m.group(1)] = m.group(2).strip()
    return table.get(m.group(1), "")


def split_costs(path: Path, in_allocator) -> tuple[int, int]:
    """(all instructions, the allocator's) of one callgrind output file. Every function's self
    cost goes to the allocator when in_allocator(object, function); so does the whole cost of
    a call the allocator makes out of itself (memset for calloc, mmap's wrapper, ld.so's
    __tls_get_addr for a library built with dynamic TLS), which is the allocator's work done
    elsewhere."""
    obs: dict = {}
    fns: dict = {}
    ob = fn = cfn = ""
    cob = None
    total = alloc = 0
    call = False                 # the cost line after calls= is that call's inclusive cost
    with open(path, errors="replace") as f:
        for line in f:
            c = line[:1]
            if c.isdigit() or c in "+-*":
                parts = line.split()
                ir = int(parts[1]) if len(parts) > 1 else 0
                if call:
                    call = False
                    if in_allocator(ob, fn) and not in_allocator(cob or ob, cfn):
                        alloc += ir
                    cob = None
                    continue
                total += ir
                if in_allocator(ob, fn):
                    alloc += ir
            elif line.startswith("ob="):
                ob = _named(line[3:], obs)
            elif line.startswith("cob="):
                cob = _named(line[4:], obs)
            elif line.startswith("fn="):
                fn = _named(line[3:], fns)
            elif line.startswith("cfn="):
                cfn = _named(line[4:], fns)
            elif line.startswith("calls="):
                call = True
    return total, alloc


def classifier(name: str, library: Path | None):
    """in_allocator(object, function) for allocator `name` (library: what is preloaded)."""
    if library is None:
        return lambda ob, fn: (os.path.basename(ob).startswith("libc.so")
                               and GLIBC_MALLOC.fullmatch(fn.split("@")[0].split(".")[0])
                               is not None)
    real = os.path.realpath(library)
    # callgrind names no object ("???") for tcmalloc's malloc and free; they are its own
    return lambda ob, fn: bool(ob) and (os.path.realpath(ob) == real or (
        ob == "???" and API.fullmatch(fn.split("@")[0]) is not None))


def instructions(argv: list[str], env: dict, name: str, library: Path | None,
                 cwd: Path) -> tuple[int, int]:
    """(all instructions, the allocator's) of one run of argv under callgrind."""
    with tempfile.TemporaryDirectory(prefix="xalloc-counts-") as tmp:
        res = subprocess.run(["valgrind", "--tool=callgrind", "--trace-children=yes",
                              f"--callgrind-out-file={tmp}/cg.%p", *argv], env=env, cwd=cwd,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if res.returncode != 0:
            raise HctuneError(f"callgrind failed on {Path(argv[0]).name} under {name}: "
                              f"{res.stderr.strip()[-300:]}")
        inside = classifier(name, library)
        total = alloc = 0
        for f in Path(tmp).glob("cg.*"):
            t, a = split_costs(f, inside)
            total, alloc = total + t, alloc + a
    return total, alloc


def candidate_of(c: dict) -> Candidate:
    """A validation summary's candidate, rebuilt to be run again (HC rebuilt from its setting
    through the build cache)."""
    name, key = c["allocator"], c.get("setting")
    if name == "hc":
        setting = knobs.parse_sets(key.split(",")) if key else knobs.preset("generic")
    else:
        setting = allocator_knobs.from_key(name, key) if key else None
    a = allocators.resolve(name, setting)
    return Candidate(c["candidate"], c["kind"], name, a.library, setting,
                     env=dict(a.variables))


def env_of(cand: Candidate, extra: dict) -> dict:
    env = allocators.Allocator(cand.allocator, cand.library).env()
    env.pop("HCMALLOC_STATS", None)
    env.update(cand.env or {})
    env.update(extra)
    return env


def inputs(out: Path, scale: float) -> None:
    if not (out / "text-b.txt").exists():
        out.mkdir(parents=True, exist_ok=True)
        xh.headline_real.make_inputs(out, "b", 2007, scale)


def share(a) -> int:
    out = Path(a.out).resolve()
    inputs(out, a.scale)
    names = allocators.parse_list(a.allocators)
    print(f"# .venv/bin/python bench/xalloc_counts.py --share --out {a.out} --scale {a.scale:g} "
          f"--allocators {','.join(names)} " + " ".join(a.programs))
    print("\n| program | allocator | instructions (M) | in the allocator (M) | share |\n"
          "|---|---|---:|---:|---:|")
    for prog in a.programs:
        argv, extra = xh.command(prog, out, "b", 2007, a.scale)
        for name in names:
            try:
                al = allocators.resolve(name)
            except HctuneError as e:
                print(f"# {name} left out: {e}", file=sys.stderr)
                continue
            env = al.env()
            env.pop("HCMALLOC_STATS", None)
            env.update(extra)
            total, alloc = instructions(argv, env, name, al.library, out)
            print(f"| {prog} | {name} | {total / 1e6:,.1f} | {alloc / 1e6:,.1f} | "
                  f"{100 * alloc / total:.1f} % |", flush=True)
    return 0


def faults(launcher: Path, prog: Program, cands: list[Candidate], runs: int) -> dict:
    """Median minor page faults of each candidate over `runs` interleaved real runs (the
    children's rusage: hcrun's few included)."""
    got: dict = {c.label: [] for c in cands}
    rng = random.Random(1)
    for _ in range(runs):
        order = list(cands)
        rng.shuffle(order)
        for c in order:
            before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt
            r = run_once(launcher, prog, c, 600)
            if not r.get("problem"):
                got[c.label].append(resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt
                                    - before)
    return {k: statistics.median(v) if v else None for k, v in got.items()}


def counts(a) -> int:
    out = Path(a.out).resolve()
    done = out / "xalloc-headline.json"
    if not done.exists():
        print(f"xalloc_counts: no {done}; run bench/xalloc_headline.py --objectives perf first",
              file=sys.stderr)
        return 2
    results = json.loads(done.read_text())
    small = out / f"count-s{a.count_scale:g}"
    inputs(small, a.count_scale)
    print(f"# .venv/bin/python bench/xalloc_counts.py --out {a.out} --count-scale "
          f"{a.count_scale:g} --fault-runs {a.fault_runs} --validate-scale {a.validate_scale:g} "
          + " ".join(a.programs))
    print("\n| program | answer | fastest as it comes | wall answer / fastest (paired 95 % CI) "
          "| significant | instructions answer / fastest | minor faults answer / fastest "
          "| count moved (wins only) | answer / glibc: instructions, faults |\n|---|---|---|---|---|---|---|---|---|")
    launcher = hcrun()
    for prog in a.programs:
        s = (results.get(prog) or {}).get("perf")
        if not s:
            continue
        c = xh.compare(s, "perf")
        by = {x["candidate"]: x for x in s["candidates"]}
        labels = list(dict.fromkeys(x for x in (c["winner"], c["best_default"], "glibc")
                                    if x in by))
        cands = [candidate_of(by[x]) for x in labels]
        argv, extra = xh.command(prog, out, "b", 2007, a.validate_scale)
        for cand in cands:
            cand.env = {**(cand.env or {}), **extra}
        flt = faults(launcher, Program(argv=argv, cwd=str(out)), cands, a.fault_runs)
        argv_s, extra_s = xh.command(prog, small, "b", 2007, a.count_scale)
        ins = {cand.label: instructions(argv_s, env_of(cand, extra_s), cand.allocator,
                                        cand.library, small)[0] for cand in cands}
        w, b = c["winner"], c["best_default"]

        def ratio(d, x, y):
            return d[x] / d[y] if d.get(x) and d.get(y) else None

        ri, rf = ratio(ins, w, b), ratio(flt, w, b)
        moved = [n for n, r in (("instructions", ri), ("faults", rf)) if r is not None
                 and r <= 0.98]
        wall = f"{c['ratio']:.3f}" if c.get("ratio") else "-"
        if c.get("ci"):
            wall += f" ({c['ci'][0]:.3f}–{c['ci'][1]:.3f})"
        gi, gf = ratio(ins, w, "glibc"), ratio(flt, w, "glibc")
        fmt = (lambda r: "-" if r is None else f"{r:.3f}")
        print(f"| {prog} | {w} | {b} | {wall} | {'yes' if c.get('significant') else 'no'} | "
              f"{fmt(ri)} ({ins.get(w, 0) / 1e6:,.0f} M / {ins.get(b, 0) / 1e6:,.0f} M) | "
              f"{fmt(rf)} ({flt.get(w) or 0:,.0f} / {flt.get(b) or 0:,.0f}) | "
              f"{(', '.join(moved) or 'no count moved') if c.get('significant') else '-'} | "
              f"{fmt(gi)}, {fmt(gf)} |",
              flush=True)
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 epilog=__doc__[__doc__.index("The criterion"):],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="bench-out/xalloc-perf-long")
    ap.add_argument("--share", action="store_true",
                    help="the allocator's share of each program's instructions (callgrind)")
    ap.add_argument("--scale", type=float, default=1.0, help="--share's input scale")
    ap.add_argument("--allocators", default="glibc,jemalloc,mimalloc,hc",
                    help="--share's allocators, as they come")
    ap.add_argument("--count-scale", type=float, default=1.0,
                    help="the input scale of the callgrind runs beside the perf rows")
    ap.add_argument("--validate-scale", type=float, default=1.0,
                    help="the scale of the headline's validation input (its --validate-scale)")
    ap.add_argument("--fault-runs", type=int, default=3)
    ap.add_argument("programs", nargs="*", default=list(xh.PROGRAMS), type=xh.program_name)
    a = ap.parse_args(argv)
    try:
        return share(a) if a.share else counts(a)
    except HctuneError as e:
        print(f"xalloc_counts: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
