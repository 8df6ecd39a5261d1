"""What the footprint recipe saves a footprint study (configs/build.toml's footprint_cflags, -Og,
against the -O2 `cflags` every trial compiled with before): an HC-only `mem` study of HC's
footprint, run for a fixed budget of wall time from a fresh database and a fresh build cache,
once per recipe, interleaved; reported as trials evaluated in the budget and CPU seconds (user +
sys of the search and every compiler and replay it ran) per evaluated trial.

    python bench/search_footprint_build.py TRACE [TRACE ...] [--timeout 120] [--rounds 1]

The -O2 arm is the same code with Options.footprint_build forced to False (what every study did
before). Trials in a budget depend on the machine's load; the CPU per trial much less: say the
load (the script prints the load average before and after each run).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def child(trace: str, recipe: str, timeout: float, db: str) -> None:
    sys.path.insert(0, str(ROOT / "tuner"))
    from hctune.search import study
    from hctune.search.options import Options
    if recipe == "O2":
        Options.footprint_build = lambda self: False       # every study before the recipe
    opts = Options(objective="mem", allocators=("hc",), trials=None, timeout=timeout, jobs=2,
                   seed=1)
    r = study.run(db, [trace], opts)
    from hctune.db import Database
    with Database(db) as d:
        _, st = study.load(d, r["study"])
    durations = [(t.datetime_complete - t.datetime_start).total_seconds()
                 for t in st.get_trials(deepcopy=False)
                 if t.datetime_complete is not None and t.datetime_start is not None
                 and "skipped" not in t.user_attrs]
    print(json.dumps({"trials": r["trials"], "trial_seconds": durations}))


def run(trace: str, recipe: str, timeout: float) -> dict:
    work = Path(tempfile.mkdtemp(prefix="hctune-bench-fp-"))
    env = dict(os.environ, HCTUNE_CACHE=str(work / "cache"), PYTHONPATH=str(ROOT / "tuner"))
    load = os.getloadavg()[0]
    started = time.monotonic()
    p = subprocess.Popen([sys.executable, __file__, "--child", recipe, "--timeout", str(timeout),
                          "--db", str(work / "hctune.db"), trace], env=env,
                         stdout=subprocess.PIPE, text=True)
    out = p.stdout.read()
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.monotonic() - started
    shutil.rmtree(work, ignore_errors=True)
    if status != 0:
        raise SystemExit(f"the {recipe} run on {trace} failed (status {status})")
    res = json.loads(out.strip().splitlines()[-1])
    acc = res["trials"]
    cpu = ru.ru_utime + ru.ru_stime
    secs = sorted(res["trial_seconds"])
    return {"trace": Path(trace).name, "recipe": recipe, "evaluated": acc["trials"],
            "sampled": acc["sampled"] + acc["pruned_sampled"], "whole": acc["whole"],
            "pruned_on_part": acc["pruned_on_part"], "cpu_s": round(cpu, 1),
            "cpu_per_trial_s": round(cpu / max(1, acc["trials"]), 3),
            "median_trial_wall_s": round(secs[len(secs) // 2], 3) if secs else None,
            "wall_s": round(wall, 1), "load_before": round(load, 2),
            "load_after": round(os.getloadavg()[0], 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("traces", nargs="+")
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--child", choices=("O2", "footprint"))
    ap.add_argument("--db")
    a = ap.parse_args()
    if a.child:
        child(a.traces[0], a.child, a.timeout, a.db)
        return
    print("# python bench/search_footprint_build.py " + " ".join(a.traces)
          + f" --timeout {a.timeout:g} --rounds {a.rounds}   ({os.cpu_count()} cores)")
    for _ in range(a.rounds):
        for trace in a.traces:
            for recipe in ("O2", "footprint"):      # interleaved: the load changes slowly
                print(json.dumps(run(trace, recipe, a.timeout)), flush=True)


if __name__ == "__main__":
    main()
