"""A search process for the fault tests (test_faults_search.py): `hctune.search.study.run` on a
stand-in trace with a synthetic cost model in place of the replay harness, so a trial takes a
few milliseconds to a second and the tests can kill it anywhere, fast.

    python faults_search_worker.py DB STUDY TRIALS [--meet DIR N] [--hang-in-trial FILE]
                                                   [--sleep S]

--meet: once imported, put a file in DIR and wait until N processes have (processes started
together reach the empty database together, however long each takes to import Optuna);
--hang-in-trial: after the glibc baseline,
create FILE at the first HC measurement of a trial (not generic HC's, the
reference measured before any trial) and hang there (the test kills the process);
--sleep: seconds each HC measurement takes. Prints the summary as JSON; notices on stderr.
"""

import argparse
import json
import os
import sys
import time
from pathlib import Path

from hctune import knobs
from hctune.db import Database
from hctune.search import space, study


def model(hang_file, sleep):
    generic = space.for_search(knobs.preset("generic"))  # the reference, measured before any trial

    def measure(path, allocator="hc", setting=None, repeat=3, metric="time"):
        if allocator != "hc":
            return {"footprint_bytes": 1_000_000, "peak_rss_bytes": 1_000_000,
                    "time_ns_per_op": 50.0, "instructions_per_op": 200.0}
        if hang_file and setting != generic:
            Path(hang_file).write_text("measuring")
            time.sleep(3600)
        time.sleep(sleep)
        s = setting
        mem = 1_000_000 * (0.8 + s["QL_HIGH"] / 2000 - 0.05 * s["COALESCE"])
        t = 50 * (0.7 + 0.1 * s["COALESCE"] - s["QL_HIGH"] / 4000)
        return {"footprint_bytes": mem, "peak_rss_bytes": mem * 1.1,
                "time_ns_per_op": t, "instructions_per_op": 4 * t, "key": knobs.key(s)}
    return measure


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("db")
    ap.add_argument("study")
    ap.add_argument("trials", type=int)
    ap.add_argument("--meet", nargs=2)
    ap.add_argument("--hang-in-trial")
    ap.add_argument("--sleep", type=float, default=0.02)
    a = ap.parse_args()
    trace = Path(a.db).with_name("app.trace")
    if a.meet:
        folder, parties = Path(a.meet[0]), int(a.meet[1])
        (folder / str(os.getpid())).write_text("")
        deadline = time.time() + 300      # a guard: the others are starting
        while len(list(folder.iterdir())) < parties and time.time() < deadline:
            time.sleep(0.005)
    if not trace.exists():
        trace.write_bytes(b"stand-in; the model never reads it")
    with Database(a.db) as d:
        if d.trace_by_path(trace) is None:
            d.add_trace(trace, "ab" * 32, command="app", events=1)
    r = study.run(a.db, (), study.Options(
        objective="perf", trials=a.trials, study=a.study, seed=11, repeat=1,
        allocators=("hc",)),
        measure_fn=model(a.hang_in_trial, a.sleep),
        notice=lambda line: print(f"hctune: {line}", file=sys.stderr, flush=True))
    print(json.dumps(r))


if __name__ == "__main__":
    main()
