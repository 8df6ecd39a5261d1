#!/usr/bin/env python3
"""What is reachable at all: the programs of bench/xalloc_headline.py run for real (input b,
hcrun, interleaved rounds) under every allocator as it comes, every seed declared in
configs/allocators.toml for the objective (mem: each allocator's smallest settings: glibc's,
jemalloc's `lean`, `no_decay`, mimalloc's `decommit_now`, tcmalloc's `aggressive_decommit`,
...; perf: the `fast` ones) and HC's generic preset (mem: also the paper's Table 6 and the
small-page sizes 256 and 4096); no search, no replay. Prints per program the median peak RSS,
time-weighted mean RSS, final RSS (the last sample: what is left after the peak), wall time, CPU time (user+sys) and minor page faults of each setting
(perf: with the runs' range), and the best setting's ratio to the best allocator as it comes
(mem: on the three RSS measures; perf: on wall and CPU time).

    .venv/bin/python bench/xalloc_reach.py [--out bench-out/xalloc-headline] [--runs 3]
        [--scale 0.5] [--objective mem|perf] [--try ALLOCATOR:KNOB=V,KNOB=V ...] [PROGRAM ...]

--try adds a setting that is not declared as a seed (checked like `--set`), to measure it
before declaring it. Seed thread knobs (arena counts) are run for every program, threaded or
not. Page faults are the run's (hcrun's few included), from the children's rusage. A
benchmark, never a test: a few minutes at scale 0.5 (the long-running programs take 3 s a run).
"""

from __future__ import annotations

import argparse
import importlib.util
import random
import resource
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("xalloc_headline",
                                               ROOT / "bench" / "xalloc_headline.py")
xh = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(xh)

from hctune import allocator_knobs, allocators, build, knobs  # noqa: E402
from hctune.errors import HctuneError  # noqa: E402
from hctune.validate.candidates import Candidate  # noqa: E402
from hctune.validate.launcher import hcrun  # noqa: E402
from hctune.validate.program import Program  # noqa: E402
from hctune.validate.runs import run_once  # noqa: E402

HC = {"hc generic": knobs.preset("generic"), "hc paper-generic": knobs.preset("paper-generic"),
      "hc SMALL_MAX=256": knobs.complete({**knobs.preset("generic"), "SMALL_MAX": 256}),
      "hc SMALL_MAX=4096": knobs.complete({**knobs.preset("generic"), "SMALL_MAX": 4096})}


def tried(text: str) -> tuple[str, dict]:
    """`jemalloc:thp=always,metadata_thp=auto` -> ("jemalloc", its checked setting)."""
    name, sep, sets = text.partition(":")
    if not sep or not sets:
        raise HctuneError(f"--try wants ALLOCATOR:KNOB=VALUE[,KNOB=VALUE], got {text!r}")
    return name, allocator_knobs.parse_sets(name, sets.split(","))


def candidates(objective: str = "mem", tries: tuple = ()) -> list[Candidate]:
    out = []
    for name in allocator_knobs.names():
        try:
            settings = [(name, None)] + [(label.split(" (")[0], s)
                                         for label, s in allocator_knobs.seeds(name, objective)]
            settings += [(f"{name} {allocator_knobs.key(name, s)}", s)
                         for n, s in tries if n == name]
            for label, setting in settings:
                a = allocators.resolve(name, setting)
                out.append(Candidate(label, "reference" if setting is None else "extra", name,
                                     a.library, setting, env=dict(a.variables)))
        except HctuneError as e:
            print(f"# {name} left out: {e}", file=sys.stderr)
    for label, setting in HC.items():
        if objective == "mem" or label == "hc generic":
            out.append(Candidate(label, "extra", "hc", build.build_hc(setting), setting))
    return out


def faults_of_children() -> int:
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt


def spread(values: list[float], fmt: str) -> str:
    med = statistics.median(values)
    if len(values) < 2:
        return format(med, fmt)
    return f"{format(med, fmt)} ({format(min(values), fmt)}–{format(max(values), fmt)})"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="bench-out/xalloc-headline")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--scale", type=float, default=0.5)
    ap.add_argument("--objective", choices=("mem", "perf"), default="mem")
    ap.add_argument("--try", dest="tries", action="append", default=[],
                    metavar="ALLOCATOR:KNOB=V,KNOB=V")
    ap.add_argument("programs", nargs="*", default=list(xh.PROGRAMS), type=xh.program_name)
    a = ap.parse_args(argv)
    try:
        tries = tuple(tried(t) for t in a.tries)
        cands = candidates(a.objective, tries)
    except HctuneError as e:
        print(f"xalloc_reach: {e}", file=sys.stderr)
        return 2
    out = Path(a.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    if not (out / "text-b.txt").exists():
        xh.headline_real.make_inputs(out, "b", 2007, a.scale)
    launcher, rng = hcrun(), random.Random(1)
    print(f"# .venv/bin/python bench/xalloc_reach.py --out {a.out} --runs {a.runs} "
          f"--scale {a.scale} --objective {a.objective} "
          + "".join(f"--try {t} " for t in a.tries) + " ".join(a.programs))
    summary = []
    for name in a.programs:
        argv_b, env = xh.command(name, out, "b", 2007, a.scale)
        prog = Program(argv=argv_b, cwd=str(out))
        rows = {c.label: [] for c in cands}
        for _ in range(a.runs):
            order = list(cands)
            rng.shuffle(order)
            for c in order:
                c.env = {**(c.env or {}), **env}
                before = faults_of_children()
                r = run_once(launcher, prog, c, 600)
                r["minflt"] = faults_of_children() - before
                if not r.get("problem"):
                    rows[c.label].append(r)
        print(f"\n## {name} ({a.runs} interleaved runs each; MiB, s; perf: median (range))\n")
        print("| setting | peak RSS | mean RSS | final RSS | wall | CPU | minor faults |\n"
              "|---|---:|---:|---:|---:|---:|---:|")
        med = {}
        for c in cands:
            rs = rows[c.label]
            if not rs:
                print(f"| {c.label} | failed | | | | | |")
                continue
            wall = [r["wall_s"] for r in rs]
            cpu = [r["user_s"] + r["sys_s"] for r in rs]
            flt = [r["minflt"] for r in rs]
            med[c.label] = (statistics.median(r["peak_rss_bytes"] for r in rs) / 2**20,
                            statistics.median(r["rss_mean_bytes"] or 0 for r in rs) / 2**20,
                            statistics.median(r["rss_final_bytes"] or 0 for r in rs) / 2**20,
                            statistics.median(wall), statistics.median(cpu))
            print(f"| {c.label} | {med[c.label][0]:.1f} | {med[c.label][1]:.1f} | "
                  f"{med[c.label][2]:.1f} | "
                  f"{spread(wall, '.3f')} | {spread(cpu, '.3f')} | {spread(flt, '.0f')} |")
        defaults = [c.label for c in cands if c.kind == "reference" and c.label in med]
        line = [name]
        measures = ((0, "peak"), (1, "mean"), (2, "final")) if a.objective == "mem" else \
            ((3, "wall"), (4, "CPU"))
        for i, what in measures:
            known = [k for k in med if med[k][i] > 0]     # 0: no RSS sample (a short run)
            if not known or not any(k in known for k in defaults):
                continue
            d = min((k for k in defaults if k in known), key=lambda k: med[k][i])
            b = min(known, key=lambda k: med[k][i])
            line.append(f"{what}: {b} {med[b][i] / med[d][i]:.3f} of {d}")
        summary.append(" | ".join(line))
    print("\n## best setting / best allocator as it comes (medians)\n")
    print("\n".join(f"- {s}" for s in summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
