#!/usr/bin/env python3
"""How fast does the search find the optimum? (long: a benchmark, not a test)

    .venv/bin/python bench/search_efficiency.py [--trace T] [--db D] [--budget 60] \
        [--seeds 5] [--space grid|full] [--jobs 2]

1. The true optimum: every combination of the 4 boolean policy knobs (SPLIT, COALESCE,
   COALESCE_QL, COALESCE_IN_FREE) x every QL_HIGH value of the search grid, other knobs at their
   defaults, each measured once (footprint, and instructions per op under callgrind, so it is
   deterministic).  Measurements go to the database, so a rerun is cheap.
2. For mem and for perf (instructions), `--seeds` Optuna studies (TPE, seeded with the paper's
   settings) and as many random-search studies, each with `--budget` trials: the best value
   after each trial, and the number of trials each needed to come within 1 % of the optimum.
   --space grid searches the grid's 5 knobs (every trial reuses a grid measurement); --space
   full searches every knob (new builds; it may beat the grid, whose other knobs are fixed).
Without --trace, a small real trace is recorded: gawk on generated text (the LD_PRELOAD tracer).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import itertools
import json
import os
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

import optuna

from hctune import knobs, paths
from hctune.db import Database
from hctune.search import objective as _obj
from hctune.search import space
from hctune.search import study as _study

BOOLS = ("SPLIT", "COALESCE", "COALESCE_QL", "COALESCE_IN_FREE")
GRID_KNOBS = ("QL_HIGH", *BOOLS)
WITHIN = 0.01

AWK = ('{ for (i = 1; i <= NF; i++) { c[$i]++; if (length($i) > 6) l[$i] = $0 } } '
       'NR % 700 == 0 { for (w in l) delete l[w] } END { print length(c) }')


def record_trace(out: Path) -> Path:
    import random
    rng = random.Random(5)
    words = ["".join(rng.choice("etaoinshrd") for _ in range(rng.randint(2, 10)))
             for _ in range(1500)]
    text = out.with_suffix(".txt")
    text.write_text("".join(" ".join(rng.choice(words) for _ in range(rng.randint(2, 12))) + "\n"
                            for _ in range(3000)))
    env = dict(os.environ, LD_PRELOAD=str(paths.BUILD / "libhctrace.so"), HCTRACE_OUT=str(out))
    subprocess.run(["gawk", AWK, str(text)], env=env, check=True, stdout=subprocess.DEVNULL)
    return out


def grid() -> list[dict]:
    ql = space.distribution(knobs.knobs()["QL_HIGH"])
    out = []
    for q in range(ql.low, ql.high + 1, ql.step):
        for bits in itertools.product((0, 1), repeat=len(BOOLS)):
            s = space.for_search(knobs.defaults())
            s.update(QL_HIGH=q, **dict(zip(BOOLS, bits)))
            out.append(s)
    return out


def measure_grid(db_path, trace, jobs) -> dict:
    with Database(db_path) as db:
        t = _study.register_trace(db, trace)
    ev = _obj.Evaluator(db_path, [t], metric="instructions", repeat=1)
    settings = grid()
    started, values = time.monotonic(), {}

    def one(s):
        e = ev.evaluate(s)
        return knobs.key(s), e.mem, e.perf

    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        for i, (k, mem, perf) in enumerate(pool.map(one, settings), 1):
            values[k] = (mem, perf)
            if i % 50 == 0 or i == len(settings):
                print(f"  grid {i}/{len(settings)} ({time.monotonic() - started:.0f} s)",
                      file=sys.stderr)
    return {"trace": t, "values": values,
            "mem": min(v[0] for v in values.values()),
            "perf": min(v[1] for v in values.values()),
            "seconds": time.monotonic() - started}


def run_study(db_path, trace, objective, sampler, seed, budget, only, jobs):
    opts = _study.Options(objective=objective, metric="instructions", trials=budget,
                          allocators=("hc",),   # HC's knobs: the efficiency measured here
                          seed=seed, repeat=1, sampler=sampler, jobs=jobs, only=only,
                          study=f"eff-{objective}-{sampler}-{seed}-{'grid' if only else 'full'}")
    _study.run(db_path, [trace], opts)
    with Database(db_path) as db:
        _, st = _study.load(db, opts.study)
    ts = sorted(_study.finished(st), key=lambda t: t.number)[:budget]
    best, curve = float("inf"), []
    for t in ts:
        best = min(best, t.user_attrs[objective])
        curve.append(best)
    return curve


def first_within(curve, optimum):
    return next((i + 1 for i, v in enumerate(curve) if v <= optimum * (1 + WITHIN)), None)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", default=None)
    ap.add_argument("--db", default="bench-out/search_efficiency.db")
    ap.add_argument("--budget", type=int, default=60)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--space", choices=("grid", "full"), default="grid")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--json", default=None, help="also write the results here")
    a = ap.parse_args(argv)
    Path(a.db).parent.mkdir(parents=True, exist_ok=True)
    trace = Path(a.trace) if a.trace else record_trace(Path(a.db).parent / "gawk-small.hct")
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    g = measure_grid(a.db, trace, a.jobs)
    print(f"grid: {len(g['values'])} settings measured or reused in {g['seconds']:.0f} s; "
          f"optimum mem {g['mem']:.4f}x glibc, perf {g['perf']:.4f}x glibc (instructions)")
    only = GRID_KNOBS if a.space == "grid" else None
    report = {"trace": str(trace), "grid_size": len(g["values"]), "space": a.space,
              "budget": a.budget, "optimum": {"mem": g["mem"], "perf": g["perf"]}, "runs": {}}
    for objective in ("mem", "perf"):
        for sampler in ("tpe", "random"):
            curves = [run_study(a.db, trace, objective, sampler, seed, a.budget, only, 1)
                      for seed in range(a.seeds)]
            finals = [c[-1] / g[objective] for c in curves]
            hits = [first_within(c, g[objective]) for c in curves]
            reached = [h for h in hits if h is not None]
            med = statistics.median(h if h is not None else float("inf") for h in hits)
            report["runs"][f"{objective}/{sampler}"] = {
                "final_vs_optimum": finals, "trials_to_within_1pct": hits}
            print(f"{objective:4} {sampler:6}: best/optimum after {a.budget} trials: median "
                  f"{statistics.median(finals):.4f} (worst {max(finals):.4f}); within 1 % in "
                  f"{len(reached)}/{len(hits)} runs, median trials needed "
                  f"{med if med != float('inf') else 'not reached'} (each: {hits})")
    if a.json:
        Path(a.json).write_text(json.dumps(report, indent=2, sort_keys=True))
    print("# reproduce: .venv/bin/python bench/search_efficiency.py "
          + " ".join(shlex.quote(x) for x in (argv or sys.argv[1:])), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
