#!/usr/bin/env python3
"""How long `hctune` takes to answer when it has little to do (issue 23: `hctune --help` ≤ 0.15 s).

    .venv/bin/python bench/cli_start.py [--runs 15]

Runs each command line below RUNS times as a new process (`.venv/bin/hctune ...`), interleaved
(each round runs every line once) so that the machine's other work hits all alike, and prints the
median wall time with the min-max spread, and the median CPU time (user + system, from
getrusage: what the process itself costs, which a loaded machine inflates far less).
Also prints the modules each line imports (a count, which tests/test_core_cli.py asserts for
--help: no Optuna, SQLAlchemy, Rich, matplotlib).
A trace to run `stats` on is written into a temporary folder (a few thousand events).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HCTUNE = ROOT / ".venv" / "bin" / "hctune"


def _trace(folder: Path) -> Path:
    sys.path.insert(0, str(ROOT / "tuner"))
    from hctune.trace import Writer, spec
    path = folder / "small.hct"
    with Writer(path, command="bench/cli_start.py") as w:
        for i in range(2000):
            w.event(spec.MALLOC, 0x10000 + 64 * i, 16 + i % 200)
        for i in range(2000):
            w.event(spec.FREE, 0x10000 + 64 * i)
    return path


def _modules(args: list[str]) -> int:
    code = "import sys\nfrom hctune.cli import main\nmain(sys.argv[1:])\nprint(len(sys.modules))"
    r = subprocess.run([str(ROOT / ".venv" / "bin" / "python"), "-c", code, *args],
                       capture_output=True, text=True)
    return int(r.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=15)
    a = ap.parse_args()
    print(f"# .venv/bin/python bench/cli_start.py --runs {a.runs}")
    print(f"# load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores "
          "(other work on the machine inflates the times; the module counts are exact)")
    with tempfile.TemporaryDirectory() as d:
        trace = _trace(Path(d))
        lines = [["--help"], ["--version"], ["stats", "--help"], ["stats", str(trace), "--json"]]
        times: dict[int, list[float]] = {i: [] for i in range(len(lines))}
        cpus: dict[int, list[float]] = {i: [] for i in range(len(lines))}
        for _ in range(a.runs):
            for i, args in enumerate(lines):
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                t0 = time.perf_counter()
                subprocess.run([str(HCTUNE), *args], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, check=True)
                times[i].append(time.perf_counter() - t0)
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpus[i].append(after.ru_utime + after.ru_stime - before.ru_utime
                               - before.ru_stime)
        print(f"{'command':<34} {'median s':>9} {'min-max s':>13} {'CPU s':>6} {'modules':>8}")
        for i, args in enumerate(lines):
            t = times[i]
            shown = "hctune " + " ".join("TRACE" if x == str(trace) else x for x in args)
            print(f"{shown:<34} {statistics.median(t):9.3f} {min(t):6.3f}-{max(t):.3f} "
                  f"{statistics.median(cpus[i]):6.3f} {_modules(args):8d}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
