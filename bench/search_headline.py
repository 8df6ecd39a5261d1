#!/usr/bin/env python3
"""The headline table for bench/headline.sh: per program, tuned HC against every allocator.

    .venv/bin/python bench/search_headline.py --db DB --out DIR NAME...

For trace DIR/NAME.hct with studies headline-NAME-perf and headline-NAME-mem: the tuned-perf
setting's replay time per op and the tuned-mem setting's peak RSS, each divided by the same
number for glibc, jemalloc, mimalloc and tcmalloc (all in the same replay harness, 5 repeats).
Below 1.00 means HC tuned by hctune is faster / smaller.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import search_compare  # noqa: E402

OTHERS = search_compare.OTHERS


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="+")
    ap.add_argument("--db", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args(argv)
    table, raw = [], {}
    for name in a.names:
        trace = str(Path(a.out) / f"{name}.hct")
        rows = search_compare.rows_for(a.db, trace, [f"headline-{name}-perf",
                                                     f"headline-{name}-mem"], a.repeat)
        by = {r["allocator"].split(" (")[0]: r for r in rows}
        raw[name] = rows
        perf, mem = by["hc tuned perf"], by["hc tuned mem"]
        table.append((name, [perf["time_ns_per_op"] / by[o]["time_ns_per_op"] for o in OTHERS],
                      [mem["peak_rss_bytes"] / by[o]["peak_rss_bytes"] for o in OTHERS]))
    head = ("program".ljust(12) + "".join(f"{'time/' + o:>16}" for o in OTHERS)
            + "".join(f"{'RSS/' + o:>15}" for o in OTHERS))
    print(head)
    print("-" * len(head))
    for name, t, m in table:
        print(name.ljust(12) + "".join(f"{v:16.3f}" for v in t) + "".join(f"{v:15.3f}" for v in m))
    gm = lambda xs: statistics.geometric_mean(xs)  # noqa: E731
    print("geomean".ljust(12) + "".join(f"{gm([r[1][i] for r in table]):16.3f}"
                                        for i in range(len(OTHERS)))
          + "".join(f"{gm([r[2][i] for r in table]):15.3f}" for i in range(len(OTHERS))))
    (Path(a.out) / "headline.json").write_text(json.dumps(raw, indent=2, sort_keys=True))
    print("# time: tuned for perf, replay ns/op; RSS: tuned for mem, peak RSS of the replay; "
          "ratios < 1 favour HC. reproduce: bash bench/headline.sh", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
