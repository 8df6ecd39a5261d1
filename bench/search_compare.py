#!/usr/bin/env python3
"""Compare tuned HC with glibc, jemalloc, mimalloc and tcmalloc on one trace, in one table.

    .venv/bin/python bench/search_compare.py --db hctune.db TRACE [--study NAME ...] [--json]

Every allocator runs in the same replay harness (hctune.replay.measure), so they are measured
alike: memory is peak RSS during the replay loop (every block's pages touched), time the median
CPU time of the loop per operation. Tuned rows: the generic HC setting (Hasan & Chang 2006,
Table 6) and the best trial of each study named (default: every study of the trace in the
database), on whichever allocator that trial measured (a cross-allocator study's best can be
jemalloc with its knobs).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys

from hctune import allocators, knobs, replay
from hctune.db import Database
from hctune.errors import HctuneError
from hctune.search import results, space
from hctune.search import study as _study

OTHERS = ("glibc", "jemalloc", "mimalloc", "tcmalloc")


def rows_for(db_path, trace, studies, repeat: int) -> list[dict]:
    rows = []
    with Database(db_path) as db:
        trace_row = db.trace_by_path(trace)
        if studies is None:
            studies = [r["name"] for r in db.query("SELECT name, trace_ids FROM hc_studies")
                       if trace_row is not None and json.loads(r["trace_ids"]) == [trace_row["id"]]]
        settings = [("hc generic", "hc", space.for_search(knobs.preset("generic")))]
        for name in studies:
            row, st = _study.load(db, name)
            objectives = ("mem", "perf") if row["objective"] == "pareto" else (row["objective"],)
            for o in objectives:
                t = _study.choose(st, o)
                if t is not None:
                    alloc = _study.trial_allocator(t)
                    settings.append((f"{alloc} tuned {o} ({name})", alloc,
                                     _study.trial_setting(t)))
    with Database(db_path) as db:
        trace_id = _study.register_trace(db, trace).id
        for name in OTHERS:
            try:
                r = replay.measure(trace, allocator=name, repeat=repeat)
            except HctuneError as e:
                print(f"skipping {name}: {e}", file=sys.stderr)
                continue
            # stored, so `hctune report` shows every allocator measured on the trace
            db.add_measurement(trace_id, name, None, "time", repeat, r)
            rows.append({"allocator": name, **pick(r)})
        for label, alloc, setting in settings:
            r = replay.measure(trace, allocator=alloc, setting=setting, repeat=repeat)
            db.add_measurement(trace_id, alloc, allocators.setting_key(alloc, setting), "time",
                               repeat, r)
            rows.append({"allocator": label, **pick(r)})
    glibc = next((r for r in rows if r["allocator"] == "glibc"), None)
    for r in rows:
        if glibc:
            r["rss_vs_glibc"] = r["peak_rss_bytes"] / max(glibc["peak_rss_bytes"], 4096)
            r["time_vs_glibc"] = r["time_ns_per_op"] / glibc["time_ns_per_op"]
    return rows


def pick(r: dict) -> dict:
    return {"peak_rss_bytes": max(r["peak_rss_bytes"], 4096), "footprint_bytes": r["footprint_bytes"],
            "footprint_source": r.get("footprint_source"), "max_live_bytes": r["max_live_bytes"],
            "time_ns_per_op": r["time_ns_per_op"], "spread": r.get("spread")}


def table(rows: list[dict]) -> str:
    head = (f"{'allocator':44} {'peak RSS KiB':>12} {'vs glibc':>8} {'HC footprint':>12} "
            f"{'ns/op':>8} {'vs glibc':>8} {'spread':>7}")
    out = [head, "-" * len(head)]
    for r in rows:
        hc = f"{r['footprint_bytes'] / 1024:.0f}" if r["footprint_source"] == "hc_stats" else "-"
        out.append(f"{r['allocator'][:44]:44} {r['peak_rss_bytes'] / 1024:12.0f} "
                   f"{r.get('rss_vs_glibc', float('nan')):8.3f} {hc:>12} "
                   f"{r['time_ns_per_op']:8.2f} {r.get('time_vs_glibc', float('nan')):8.3f} "
                   f"{(r['spread'] or 0) * 100:6.1f}%")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("--db", default="hctune.db")
    ap.add_argument("--study", action="append", default=None)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    try:
        rows = rows_for(a.db, a.trace, a.study, a.repeat)
    except HctuneError as e:
        print(f"search_compare: error: {e}", file=sys.stderr)
        return 2
    print(json.dumps(rows, indent=2, sort_keys=True) if a.json else table(rows))
    print(f"# reproduce: .venv/bin/python bench/search_compare.py --db {shlex.quote(a.db)} "
          f"{shlex.quote(a.trace)} --repeat {a.repeat}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
