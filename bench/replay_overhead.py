#!/usr/bin/env python3
"""The replay harness's own cost in time: replaying with the bump allocator
(allocator/replay/bump.c, a few instructions per call) against replaying with glibc, in
interleaved rounds, medians per trace (docs/replay.md, "Harness overhead").

A ratio of wall times on a shared machine is a benchmark, not a correctness check, so it lives
here; tests/test_replay_overhead.py keeps the deterministic half (callgrind's instruction count
of the loop). The bounds the test used to assert are checked and printed: bump/glibc median over
the traces <= 0.6, every trace <= 0.8 (exit 1 when not).

    .venv/bin/python bench/replay_overhead.py [--rounds 5] [TRACE ...]
(no TRACE: records the gawk, sqlite3 and python3 workloads of tests/workloads.py)
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

from hctune import paths, replay

ROOT = Path(__file__).resolve().parents[1]


def record(work: Path) -> dict[str, Path]:
    sys.path.insert(0, str(ROOT / "tests"))
    from workloads import programs, run_program             # the tests' workloads, said once
    out = {}
    for name, (argv, extra) in programs(work).items():
        out[name] = work / f"{name}.hct"
        run_program(argv, extra, preload=paths.BUILD / "libhctrace.so", HCTRACE_OUT=str(out[name]))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("traces", nargs="*", type=Path)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=5, help="replays per measurement (median)")
    a = ap.parse_args(argv)
    print(f"# .venv/bin/python bench/replay_overhead.py --rounds {a.rounds} --repeat {a.repeat}"
          + "".join(f" {t}" for t in a.traces))
    with tempfile.TemporaryDirectory(prefix="hctune-overhead-") as tmp:
        traces = {t.stem: t for t in a.traces} or record(Path(tmp))
        ratios = {}
        for name, trace in traces.items():
            per_round = []
            for _ in range(a.rounds):   # interleaved: drift of the shared machine hits both alike
                g = replay.measure(trace, "glibc", repeat=a.repeat)["time_ns_per_op"]
                b = replay.measure(trace, "bump", repeat=a.repeat)["time_ns_per_op"]
                per_round.append(b / g)
            ratios[name] = statistics.median(per_round)
            print(f"{name}: bump/glibc time median {ratios[name]:.2f} "
                  f"(rounds {min(per_round):.2f}–{max(per_round):.2f})")
    med, worst = statistics.median(ratios.values()), max(ratios.values())
    ok = med <= 0.6 and worst <= 0.8
    print(f"median over traces {med:.2f} (bound 0.6), worst {worst:.2f} (bound 0.8): "
          f"{'within' if ok else 'OVER'} the bounds")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
