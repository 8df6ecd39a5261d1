"""Does the replay rank HC settings the way the programs themselves do?

For each real workload of bench/alloc_workloads.py, three HC settings are timed two ways,
interleaved over rounds (medians): by replaying the workload's trace once from a fresh heap
(hctune.replay.measure, the harness's loop CPU time) and by running the program itself on the same build under
LD_PRELOAD (the child's user + system CPU time, everything the program does).  The orders are
printed side by side.  A bench, not a test: program times on a shared 2-core machine are too
noisy for CI, and allocator time is only part of a program's time, so close settings may swap.

    .venv/bin/python bench/compare_ranking.py TRACE_DIR [ROUNDS]
    .venv/bin/python bench/compare_ranking.py TRACE_DIR --instructions [WORKLOAD ...]
TRACE_DIR comes from bench/compare_traces.py (the same workloads, inputs in TRACE_DIR/inputs).

--instructions is the deterministic form: the program's whole run under callgrind against the
replay's loop under callgrind.  The program does the same non-allocator work on every build, so
the difference between two settings in the program's count is the difference in allocator
work, and the replay's difference should match it (slow: the programs run ~50x slower).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import alloc_workloads  # noqa: E402

from hctune import build, knobs, replay  # noqa: E402

SETTINGS = ("generic", "p2c-perf", "gawk-mem")


def program_cpu_seconds(argv, env) -> float:
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{argv[0]} failed ({proc.returncode})")
    return usage.ru_utime + usage.ru_stime


def program_instructions(argv, env) -> int:
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "cg.out"
        subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *argv],
                       env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        return replay._callgrind_total(out)


def instructions(trace_dir: Path, only) -> None:
    print("# " + " ".join([".venv/bin/python", "bench/compare_ranking.py", str(trace_dir),
                           "--instructions", *only]))
    for w in alloc_workloads.make(trace_dir / "inputs", only or ["python", "sqlite3", "gawk"]):
        trace = trace_dir / f"{w.name}.hct"
        rep, run = {}, {}
        for p in SETTINGS:
            lib = build.build_hc(knobs.preset(p))
            rep[p] = replay.measure(trace, "hc", knobs.preset(p), repeat=1,
                                    metric="instructions")["instructions"]
            env = dict(os.environ, **w.env, PYTHONHASHSEED="0", LD_PRELOAD=str(lib))
            run[p] = program_instructions(w.argv, env)
        print(f"\n{w.name}: {w.what}")
        print(f"  {'setting':<10} {'replay Ir':>14} {'Δ vs generic':>14} {'program Ir':>15} "
              f"{'Δ vs generic':>14}")
        for p in SETTINGS:
            print(f"  {p:<10} {rep[p]:14,} {rep[p] - rep['generic']:+14,} {run[p]:15,} "
                  f"{run[p] - run['generic']:+14,}")
        print(f"  replay order:  {' < '.join(order(rep))}")
        print(f"  program order: {' < '.join(order(run))}  "
              f"({'same' if order(rep) == order(run) else 'differs'})")


def order(values: dict) -> list[str]:
    return sorted(values, key=values.get)


def main(trace_dir: Path, rounds: int) -> None:
    print("# " + " ".join([".venv/bin/python", "bench/compare_ranking.py", str(trace_dir),
                           str(rounds)]))
    libs = {p: build.build_hc(knobs.preset(p)) for p in SETTINGS}
    agree = total = 0
    for w in alloc_workloads.make(trace_dir / "inputs", ["python", "sqlite3", "gawk"]):
        trace = trace_dir / f"{w.name}.hct"
        if not trace.exists():
            print(f"{w.name}: no {trace}, skipped (run bench/compare_traces.py)")
            continue
        rep = {p: [] for p in SETTINGS}
        run = {p: [] for p in SETTINGS}
        for _ in range(rounds):
            for p in SETTINGS:
                # the first repeat: a fresh heap, as the program itself starts with
                rep[p].append(replay.measure(trace, "hc", knobs.preset(p), repeat=1)
                              ["first_time_ns_per_op"])
                env = dict(os.environ, **w.env, PYTHONHASHSEED="0", LD_PRELOAD=str(libs[p]))
                run[p].append(program_cpu_seconds(w.argv, env))
        rep_m = {p: statistics.median(v) for p, v in rep.items()}
        run_m = {p: statistics.median(v) for p, v in run.items()}
        same = order(rep_m) == order(run_m)
        agree += same
        total += 1
        print(f"\n{w.name}: {w.what}")
        print(f"  {'setting':<10} {'replay ns/op':>12} {'×generic':>9} {'program s':>10} "
              f"{'×generic':>9}")
        for p in SETTINGS:
            print(f"  {p:<10} {rep_m[p]:12.2f} {rep_m[p] / rep_m['generic']:9.2f} "
                  f"{run_m[p]:10.3f} {run_m[p] / run_m['generic']:9.2f}")
        print(f"  replay order:  {' < '.join(order(rep_m))}")
        print(f"  program order: {' < '.join(order(run_m))}  "
              f"({'same' if same else 'differs'})")
    print(f"\nsame order on {agree} of {total} workloads")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    if "--instructions" in sys.argv:
        instructions(Path(sys.argv[1]), [a for a in sys.argv[2:] if a != "--instructions"])
    else:
        main(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 3)
