#!/usr/bin/env python3
"""How well a window of a run stands for the whole run (issue 23): the same program profiled
whole and through a window (`hctune profile --start-after S --duration S`), both traces
replayed on glibc and on HC's generic preset, and the ratio HC/glibc the search minimises
compared between them.

    .venv/bin/python bench/window_error.py [--rounds 12] [--start-after 1.5] [--duration 1.5]
        [--period P] [--repeat 3]

With --period the second trace is time slices instead of one window: DURATION seconds of
every P from START_AFTER (`hctune profile --period`), the same measures.

The program is bench/big/factor.py under PYTHONMALLOC=malloc (as bench/big_flow.py).  Printed
per trace: events, the replay's peak RSS and HC's footprint (medians of --repeat repeats, in
one harness run each), and the ratios; the error is window ratio / whole ratio - 1.  A window
opens with the blocks live at its start (docs/tracing.md), so its peak includes the heap as it
was then.  Real-run validation (`hctune validate`) still decides; this says how far a search
on the window can be from one on the whole trace.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tuner"))


def main() -> int:
    from hctune import replay

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--start-after", type=float, default=1.5)
    ap.add_argument("--duration", type=float, default=1.5)
    ap.add_argument("--period", type=float, default=None)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    period = ["--period", str(a.period)] if a.period else []
    print(f"# .venv/bin/python bench/window_error.py --rounds {a.rounds} --start-after "
          f"{a.start_after} --duration {a.duration} {' '.join(period)} --repeat {a.repeat}")
    print(f"# load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores (memory figures "
          "are counts of the replay, not times)")
    prog = ["env", "PYTHONMALLOC=malloc", "/usr/bin/python3", str(ROOT / "bench/big/factor.py"),
            str(a.rounds)]
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        traces = {}
        for name, window in (("whole", []), ("window", ["--start-after", str(a.start_after),
                                                        "--duration", str(a.duration),
                                                        *period])):
            out = d / f"{name}.hct"
            subprocess.run([str(ROOT / ".venv/bin/hctune"), "--db", str(d / "h.db"), "profile",
                            *window, "-o", str(out), *prog], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            traces[name] = out
        rows = {}
        for name, trace in traces.items():
            g = replay.measure(trace, "glibc", repeat=a.repeat)
            h = replay.measure(trace, "hc", repeat=a.repeat)
            rows[name] = (g["events"], g["peak_rss_bytes"], h["peak_rss_bytes"],
                          g.get("mean_rss_bytes"), h.get("mean_rss_bytes"),
                          g["skipped"] + g["repaired"] + h["skipped"] + h["repaired"])
        print(f"{'trace':<8} {'events':>12} {'glibc peak MB':>14} {'HC peak MB':>11} "
              f"{'HC/glibc':>9} {'mean HC/glibc':>14} {'skipped+repaired':>17}")
        ratio, mean = {}, {}
        for name, (ev, gp, hp, gm, hm, bad) in rows.items():
            ratio[name] = hp / gp if gp else float("nan")
            mean[name] = hm / gm if gm and hm else float("nan")
            print(f"{name:<8} {ev:12,d} {gp / 1e6:14.1f} {hp / 1e6:11.1f} {ratio[name]:9.3f} "
                  f"{mean[name]:14.3f} {bad:17d}")
        print(f"error of the window's HC/glibc peak ratio against the whole run's: "
              f"{100 * (ratio['window'] / ratio['whole'] - 1):+.1f} %; of the mean RSS ratio: "
              f"{100 * (mean['window'] / mean['whole'] - 1):+.1f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
