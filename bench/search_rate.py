"""Trials a minute before and after (issue 37; protocol in docs/lab/search-registration.md, Q2).

    .venv/bin/python bench/search_rate.py TRACE SECONDS --before /path/to/main [--objective mem]
                                          [--warm] [--only before|after] [--seed 1]

Runs `hctune search TRACE --allocators hc --objective OBJ --timeout SECONDS --seed 1` from the
checkout given by --before (its tuner/ and build/) and from this one, one after the other, each
on a fresh database, the build cache shared (HCTUNE_CACHE, so both find the seeds' builds the
first run compiled: run it twice and take the second pair for a warm comparison). Counts, from
each study: trials evaluated (finished + pruned, failed apart), seeds, sampled, measured whole,
the wall time, and the load average before and after each run. Prints the command that
reproduces it.

The jq trace of docs/search.md and docs/replay.md (4.31 M events):

    python3 -c "import json, random; random.seed(1); json.dump([{'id': i, 'name': 'user%d' % i,
      'tags': ['t%d' % random.randint(0, 50) for _ in range(random.randint(1, 6))],
      'score': random.random(), 'nested': {'a': [random.randint(0, 9) for _ in
      range(random.randint(0, 8))], 'b': 'x' * random.randint(1, 40)}} for i in range(120000)],
      open('data.json', 'w'))"
    LD_PRELOAD=build/libhctrace.so HCTRACE_OUT=jq.hct jq -c '[.[] | select(.score > 0.3) |
      {id, name, n: (.tags|length), s: (.nested.a|add)}] | group_by(.n) |
      map({n: .[0].n, c: length})' data.json > /dev/null
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent


def counts(db: Path) -> dict:
    import optuna
    from optuna.trial import TrialState
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    url = f"sqlite:///{db}"
    (name,) = [s.study_name for s in optuna.get_all_study_summaries(url)]
    st = optuna.load_study(study_name=name, storage=url)
    c = {"finished": 0, "pruned": 0, "failed": 0, "seeds": 0, "sampled": 0}
    for t in st.trials:
        if t.state == TrialState.COMPLETE:
            c["finished"] += 1
            c["seeds" if "seed" in t.user_attrs else "sampled"] += 1
        elif t.state == TrialState.PRUNED and "skipped" not in t.user_attrs \
                and "stopped" not in t.user_attrs:
            c["pruned"] += 1
            c["sampled"] += "seed" not in t.user_attrs
        elif t.state == TrialState.FAIL:
            c["failed"] += 1
    c["evaluated"] = c["finished"] + c["pruned"]
    c["best"] = min((t.user_attrs["mem"] for t in st.trials
                     if t.state == TrialState.COMPLETE and "mem" in t.user_attrs), default=None)
    return c


# the seeds' builds as the tree's search would make them: a tree whose footprint-only studies
# build at footprint_cflags (build_hc's footprint=) warms those; an older tree, its one recipe
WARM = ("import inspect; from hctune import build; from hctune.search import seeds, space; "
        "fp = {{'footprint': True}} if {0!r} == 'mem' and 'footprint' in "
        "inspect.signature(build.build_hc).parameters else {{}}; "
        "[build.build_hc(space.for_search(s), **fp) for _, s in seeds.seeds({0!r})]")


def warm(tree: Path, objective: str) -> None:
    """The seeds' HC builds compiled into the build cache by `tree`'s own code (its allocator
    source), so neither run spends its minutes compiling them."""
    env = dict(os.environ, PYTHONPATH=str(tree / "tuner"))
    subprocess.run([sys.executable, "-c", WARM.format(objective)], env=env, check=True)


def run(tree: Path, trace: str, seconds: float, objective: str, work: Path, tag: str,
        seed: int = 1) -> dict:
    db = work / f"{tag}.db"
    env = dict(os.environ, PYTHONPATH=str(tree / "tuner"))
    cmd = [sys.executable, "-m", "hctune", "--db", str(db), "search", trace, "--allocators",
           "hc", "--objective", objective, "--timeout", str(seconds), "--seed", str(seed)]
    load0 = os.getloadavg()[0]
    t0 = time.monotonic()
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.monotonic() - t0
    if r.returncode != 0:
        raise SystemExit(f"{tag}: exit {r.returncode}: {r.stderr[-800:]}")
    c = counts(db)
    c.update(wall=wall, load=(load0, os.getloadavg()[0]),
             per_minute=c["evaluated"] / wall * 60)
    return c


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("seconds", type=float)
    ap.add_argument("--before", required=True, help="the checkout to compare with (main)")
    ap.add_argument("--objective", default="mem")
    ap.add_argument("--warm", action="store_true",
                    help="compile each checkout's seed builds first (the registered protocol)")
    ap.add_argument("--only", choices=("before", "after"), help="one of the two runs")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--keep", help="a folder to keep the runs' databases in")
    a = ap.parse_args()
    trees = [t for t in (("before", Path(a.before)), ("after", HERE)) if a.only in (None, t[0])]
    if a.warm:
        for _, tree in trees:
            warm(tree, a.objective)
    with tempfile.TemporaryDirectory(prefix="hctune-rate-") as d:
        work = Path(a.keep or d)
        work.mkdir(parents=True, exist_ok=True)
        rows = [(tag, run(tree, a.trace, a.seconds, a.objective, work, tag, a.seed))
                for tag, tree in trees]
    print(f"trace {a.trace}, objective {a.objective}, --timeout {a.seconds:g}, "
          f"{os.cpu_count()} cores")
    print(f"{'':7} {'evaluated':>9} {'seeds':>6} {'sampled':>8} {'whole':>6} {'pruned':>7} "
          f"{'failed':>7} {'wall s':>7} {'per min':>8} {'best':>8} {'load':>11}")
    for tag, c in rows:
        print(f"{tag:7} {c['evaluated']:9} {c['seeds']:6} {c['sampled']:8} {c['finished']:6} "
              f"{c['pruned']:7} {c['failed']:7} {c['wall']:7.0f} {c['per_minute']:8.1f} "
              f"{c['best'] if c['best'] is None else round(c['best'], 4)!s:>8} "
              f"{c['load'][0]:5.1f}-{c['load'][1]:<5.1f}")
    print(f"\nreproduce: .venv/bin/python bench/search_rate.py {a.trace} {a.seconds:g} "
          f"--before {a.before} --objective {a.objective}" + (" --warm" if a.warm else "")
          + (f" --only {a.only}" if a.only else "") + f" --seed {a.seed}"
          + (f" --keep {a.keep}" if a.keep else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
