#!/usr/bin/env python3
"""A big program through the whole flow (issue 23): profile -> stats -> search -> validate ->
emit, with each step's wall time and peak resident memory.

    .venv/bin/python bench/big_flow.py [--rounds 30] [--trials 20] [--stats-rounds 3]
        [--only-profile] [--out bench-out/big_flow]

The program is bench/big/factor.py (Pollard's rho on ROUNDS semiprimes) on the system's
python3 with PYTHONMALLOC=malloc (`env PYTHONMALLOC=malloc python3 ...`): about 3.7 M
allocator calls per round (300 rounds: 1.12 G).  Each hctune step runs
as `python -c <wrapper> ARGS` where the wrapper calls hctune.cli.main and writes the Python
process's own peak RSS (getrusage RUSAGE_SELF) and its children's (RUSAGE_CHILDREN: the traced
program, hcreplay, the validation runs) — "hctune's" is the first.  Also timed: the program
alone; profile's own work after the program exits (hctune.profile.Profile.after_seconds, from
the program's exit to the trace registered); build/hctrace-tool stats beside `hctune stats`
(three interleaved rounds, medians of wall and CPU time).
Times on the shared machine are noisy (the load average is printed); one run per step.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VENV_PY = ROOT / ".venv" / "bin" / "python"
WORKLOAD = ROOT / "bench" / "big" / "factor.py"
WRAPPER = """
import json, os, resource, sys
from hctune.cli import main
seen = {}
if "profile" in sys.argv[1:4]:     # only then: importing it costs the other steps' CPU
    import hctune.commands.profile
    _profile = hctune.commands.profile.profile
    def profile(*a, **k):
        p = _profile(*a, **k)
        seen.update(program_s=p.program_seconds, after_s=p.after_seconds,
                    after_cpu_s=p.after_cpu_seconds)
        return p
    hctune.commands.profile.profile = profile
try:
    rc = main(sys.argv[1:])
finally:
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(os.environ["BIG_FLOW_RUSAGE"], "w") as f:
        json.dump({"self_kb": me.ru_maxrss, "children_kb": kids.ru_maxrss,
                   "cpu_s": me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime,
                   **seen}, f)
sys.exit(rc)
"""


def _python() -> str:
    # the real interpreter (a version manager's shim is a shell script: LD_PRELOAD'd twice)
    for p in ("/usr/bin/python3", shutil.which("python3") or ""):
        if p and Path(p).is_file() and open(p, "rb").read(4) == b"\x7fELF":
            return p
    sys.exit("bench/big_flow.py: needs an ELF python3 (e.g. /usr/bin/python3)")


def _timed(cmd, env=None) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system) of the command and its children."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    r = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        sys.exit(f"bench/big_flow.py: {' '.join(map(str, cmd))} failed:\n{r.stderr[-2000:]}")
    return wall, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def _hctune(db: Path, work: Path, *args) -> dict:
    ru = work / "rusage.json"
    env = dict(os.environ, BIG_FLOW_RUSAGE=str(ru))
    t0 = time.perf_counter()
    r = subprocess.run([str(VENV_PY), "-c", WRAPPER, "--db", str(db), *map(str, args)],
                       env=env, cwd=work, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        sys.exit(f"bench/big_flow.py: hctune {' '.join(map(str, args))} failed:\n"
                 f"{r.stderr[-2000:]}")
    u = json.loads(ru.read_text())
    return {"wall_s": wall, "hctune_rss_mb": u["self_kb"] / 1024,
            "children_rss_mb": u["children_kb"] / 1024, "cpu_s": u["cpu_s"],
            "program_s": u.get("program_s"), "after_s": u.get("after_s"),
            "after_cpu_s": u.get("after_cpu_s"),
            "stdout": r.stdout, "stderr": r.stderr}


def _rest(rows, work: Path, db: Path, trace: Path, a) -> int:
    """search -> validate -> emit on the profiled trace."""
    r = _hctune(db, work, "search", trace, "--trials", a.trials, "--repeat", "1",
                "--objective", "mem", "--allocators", "hc", "--jobs", a.jobs, "--json")
    rows.append((f"hctune search --trials {a.trials} --repeat 1 --jobs {a.jobs}", r["wall_s"],
                 r["hctune_rss_mb"], r["children_rss_mb"],
                 f"children: hcreplay; CPU {r['cpu_s']:.0f} s"))
    r = _hctune(db, work, "validate", "--top", "1", "--runs", "3", "--no-references")
    rows.append(("hctune validate --top 1 --runs 3 --no-references", r["wall_s"],
                 r["hctune_rss_mb"], r["children_rss_mb"], "children: the program"))
    r = _hctune(db, work, "emit", "-o", work / "malloc.c")
    rows.append(("hctune emit", r["wall_s"], r["hctune_rss_mb"], r["children_rss_mb"], ""))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--stats-rounds", type=int, default=3,
                    help="interleaved rounds of the C tool and `hctune stats` (medians)")
    ap.add_argument("--only-profile", action="store_true",
                    help="stop after the profile step (profile's work after the exit)")
    ap.add_argument("--jobs", type=int, default=1, help="search --jobs (trials in parallel)")
    ap.add_argument("--resume", metavar="DIR",
                    help="go on from search in DIR (factor.hct and h.db of an earlier run's "
                         "folder, kept when that run was stopped)")
    ap.add_argument("--out", default="bench-out/big_flow")
    a = ap.parse_args()
    out = Path(a.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    py = _python()
    # through env(1), so that validate's re-runs of the profiled command get PYTHONMALLOC too
    prog = ["env", "PYTHONMALLOC=malloc", py, str(WORKLOAD), str(a.rounds)]
    print(f"# .venv/bin/python bench/big_flow.py --rounds {a.rounds} --trials {a.trials} "
          f"--stats-rounds {a.stats_rounds} --jobs {a.jobs}"
          + (" --only-profile" if a.only_profile else "")
          + (f" --resume {a.resume}" if a.resume else ""),
          flush=True)
    print(f"# load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores (a shared "
          "machine: times are one run each, inflated by other work)")
    rows = []

    class _Rows(list):      # each step's row printed when it is done (a long run shows progress)
        def append(self, row):
            super().append(row)
            name, wall, me, kids, note = row
            fmt = lambda v: f"{v:.0f}" if v is not None else "-"  # noqa: E731
            print(f"{name:<50} {wall:8.1f} {fmt(me):>10} {fmt(kids):>12}  {note}", flush=True)

    rows = _Rows()
    print(f"{'step':<50} {'wall s':>8} {'hctune MB':>10} {'children MB':>12}  note", flush=True)
    if a.resume:
        work = Path(a.resume).resolve()
        return _rest(rows, work, work / "h.db", work / "factor.hct", a)
    with tempfile.TemporaryDirectory(dir=out) as d:
        work = Path(d)
        db = work / "h.db"
        env = dict(os.environ)
        env.pop("LD_PRELOAD", None)
        alone, alone_cpu = _timed(prog, env)
        rows.append(("the program alone", alone, None, None, f"CPU {alone_cpu:.1f} s"))
        trace = work / "factor.hct"
        r = _hctune(db, work, "profile", "-o", trace, *prog)
        size = trace.stat().st_size
        st = json.loads(subprocess.run([str(ROOT / "build" / "hctrace-tool"), "stats",
                                        str(trace), "10"], capture_output=True, text=True,
                                       check=True).stdout)
        events = st["events"]
        rows.append(("hctune profile", r["wall_s"], r["hctune_rss_mb"], r["children_rss_mb"],
                     f"{events:,} events, {size / 1e6:.0f} MB ({size / events:.2f} B/event); "
                     f"the program ran {r['program_s']:.1f} s traced; hctune's work after "
                     f"it {r['after_s']:.2f} s wall, {r['after_cpu_s']:.2f} s CPU = "
                     f"{100 * r['after_s'] / r['program_s']:.1f} % of the traced run, "
                     f"{100 * r['after_s'] / alone:.1f} % of the program alone"))
        if a.only_profile:
            return 0
        # interleaved: the C tool alone, then hctune stats (which runs it), 3 rounds
        tool, mine = [], []
        for _ in range(a.stats_rounds):
            tool.append(_timed([str(ROOT / "build" / "hctrace-tool"), "stats", str(trace)]))
            r = _hctune(db, work, "stats", trace, "--json")
            mine.append((r["wall_s"], r["cpu_s"]))
        tw, tc = (statistics.median(x) for x in zip(*tool))
        mw, mc = (statistics.median(x) for x in zip(*mine))
        rows.append((f"build/hctrace-tool stats (median of {a.stats_rounds})", tw, None, None,
                     f"CPU {tc:.1f} s"))
        rows.append((f"hctune stats (median of {a.stats_rounds})", mw, r["hctune_rss_mb"], r["children_rss_mb"],
                     f"CPU {mc:.1f} s; {mw / tw:.2f}x the C tool's wall, {mc / tc:.2f}x its CPU"))
        _rest(rows, work, db, trace, a)
    (out / "result.json").write_text(json.dumps(
        [dict(zip(("step", "wall_s", "hctune_rss_mb", "children_rss_mb", "note"), r))
         for r in rows], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
