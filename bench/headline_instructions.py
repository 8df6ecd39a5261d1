#!/usr/bin/env python3
"""The headline's speed column made deterministic: instructions per operation of the replay
loop (callgrind; the allocator's work plus ~20 of the harness's own), for the setting the perf
search chose, against glibc, jemalloc, mimalloc and tcmalloc on the same traces.

Time on a shared machine moves by tens of percent between runs; instruction counts do not
(the same build, trace and allocator give the same count, bit for bit). They ignore cache
misses and page faults, which time includes, so read both.

    .venv/bin/python bench/headline_instructions.py --out bench-out/headline gawk groff ghostscript python3 sqlite3
(after `bash bench/headline.sh`, which leaves the traces and the studies in that folder)
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

from hctune import replay
from hctune.db import Database
from hctune.search import study as _study

OTHERS = ("glibc", "jemalloc", "mimalloc", "tcmalloc")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="+")
    ap.add_argument("--out", required=True, help="the bench/headline.sh output folder")
    a = ap.parse_args(argv)
    out = Path(a.out)
    head = "program".ljust(12) + f"{'HC perf':>10}" + "".join(f"{o:>10}" for o in OTHERS) + \
        "".join(f"{'/' + o:>10}" for o in OTHERS)
    print("instructions per replayed operation (callgrind, 1 repeat); ratios < 1 favour tuned HC")
    print(head)
    print("-" * len(head))
    ratios = []
    for name in a.names:
        trace = str(out / f"{name}.hct")
        with Database(out / "hctune.db") as db:
            _, st = _study.load(db, f"headline-{name}-perf")
            setting = _study.trial_setting(_study.choose(st, "perf"))
        count = lambda **kw: replay.measure(trace, repeat=1, metric="instructions",  # noqa: E731
                                            **kw)["instructions_per_op"]
        hc = count(allocator="hc", setting=setting)
        base = [count(allocator=o) for o in OTHERS]
        r = [hc / b for b in base]
        ratios.append(r)
        print(name.ljust(12) + f"{hc:10.1f}" + "".join(f"{b:10.1f}" for b in base)
              + "".join(f"{x:10.3f}" for x in r))
    print("geomean".ljust(12) + " " * 50 + "".join(
        f"{statistics.geometric_mean([r[i] for r in ratios]):10.3f}" for i in range(len(OTHERS))))
    print(f"# reproduce: .venv/bin/python bench/headline_instructions.py --out {a.out} "
          + " ".join(a.names), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
