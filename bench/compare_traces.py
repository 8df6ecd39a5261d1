"""Record one trace per real workload of bench/alloc_workloads.py (python3, cc1, sqlite3, gawk)
with the LD_PRELOAD tracer, for bench/compare_all.sh and bench/compare_ranking.py.

    .venv/bin/python bench/compare_traces.py OUTDIR          (after `make`)
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import alloc_workloads  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def record(out: Path, only=None) -> dict[str, Path]:
    tracer = ROOT / "build" / "libhctrace.so"
    if not tracer.exists():
        sys.exit("run make first (build/libhctrace.so is missing)")
    out.mkdir(parents=True, exist_ok=True)
    traces = {}
    for w in alloc_workloads.make(out / "inputs", only):
        trace = out / f"{w.name}.hct"
        env = dict(os.environ, **w.env, PYTHONHASHSEED="0", LD_PRELOAD=str(tracer),
                   HCTRACE_OUT=str(trace))
        t0 = time.monotonic()
        subprocess.run(w.argv, env=env, check=True, stdout=subprocess.DEVNULL)
        print(f"{trace}: {w.what} ({time.monotonic() - t0:.1f} s, "
              f"{trace.stat().st_size / 1e6:.1f} MB)")
        traces[w.name] = trace
    return traces


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    print("# " + " ".join([".venv/bin/python", "bench/compare_traces.py", *sys.argv[1:]]))
    record(Path(sys.argv[1]), sys.argv[2:] or None)
