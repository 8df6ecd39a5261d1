#!/usr/bin/env python3
"""What is reachable at all: the programs of bench/xalloc_headline.py run for real (input b,
hcrun, interleaved rounds) under every allocator as it comes, every mem seed declared in
configs/allocators.toml (each allocator's smallest settings: glibc's, jemalloc's `lean`,
`no_decay`, mimalloc's `decommit_now`, tcmalloc's `aggressive_decommit`, ...) and HC's generic
preset, the paper's Table 6 and the small-page sizes 256 and 4096; no search, no replay. Prints
per program the median peak RSS, time-weighted mean RSS and CPU time (user+sys) of each
setting, and the best setting's ratio to the best allocator as it comes on both RSS measures.

    .venv/bin/python bench/xalloc_reach.py [--out bench-out/xalloc-headline] [--runs 3]
        [--scale 0.5] [PROGRAM ...]

Seed thread knobs (arena counts) are run for every program, threaded or not. A benchmark,
never a test: a few minutes at scale 0.5 (the long-running programs take 3 s a run).
"""

from __future__ import annotations

import argparse
import importlib.util
import random
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


def candidates() -> list[Candidate]:
    out = []
    for name in allocator_knobs.names():
        try:
            settings = [(name, None)] + [(label.split(" (")[0], s)
                                         for label, s in allocator_knobs.seeds(name, "mem")]
            for label, setting in settings:
                a = allocators.resolve(name, setting)
                out.append(Candidate(label, "reference" if setting is None else "extra", name,
                                     a.library, setting, env=dict(a.variables)))
        except HctuneError as e:
            print(f"# {name} left out: {e}", file=sys.stderr)
    for label, setting in HC.items():
        out.append(Candidate(label, "extra", "hc", build.build_hc(setting), setting))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="bench-out/xalloc-headline")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--scale", type=float, default=0.5)
    ap.add_argument("programs", nargs="*", default=list(xh.PROGRAMS))
    a = ap.parse_args(argv)
    out = Path(a.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    if not (out / "text-b.txt").exists():
        xh.headline_real.make_inputs(out, "b", 2007, a.scale)
    cands, launcher, rng = candidates(), hcrun(), random.Random(1)
    print(f"# .venv/bin/python bench/xalloc_reach.py --out {a.out} --runs {a.runs} "
          f"--scale {a.scale} {' '.join(a.programs)}")
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
                r = run_once(launcher, prog, c, 600)
                if not r.get("problem"):
                    rows[c.label].append(r)
        print(f"\n## {name} ({a.runs} interleaved runs each; MiB, s)\n")
        print("| setting | peak RSS | mean RSS | CPU |\n|---|---:|---:|---:|")
        med = {}
        for c in cands:
            rs = rows[c.label]
            if not rs:
                print(f"| {c.label} | failed | | |")
                continue
            med[c.label] = (statistics.median(r["peak_rss_bytes"] for r in rs) / 2**20,
                            statistics.median(r["rss_mean_bytes"] or 0 for r in rs) / 2**20,
                            statistics.median(r["user_s"] + r["sys_s"] for r in rs))
            print(f"| {c.label} | {med[c.label][0]:.1f} | {med[c.label][1]:.1f} | "
                  f"{med[c.label][2]:.3f} |")
        defaults = [c.label for c in cands if c.kind == "reference" and c.label in med]
        line = [name]
        for i, what in ((0, "peak"), (1, "mean")):
            d = min(defaults, key=lambda k: med[k][i])
            b = min(med, key=lambda k: med[k][i])
            line.append(f"{what}: {b} {med[b][i] / med[d][i]:.3f} of {d}")
        summary.append(" | ".join(line))
    print("\n## best setting / best allocator as it comes (medians)\n")
    print("\n".join(f"- {s}" for s in summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
