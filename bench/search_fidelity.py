"""How well a part of a trace ranks HC settings as the whole trace does (issue 37; protocol in
docs/lab/search-registration.md, Q1).

    .venv/bin/python bench/search_fidelity.py TRACE [--random 8] [--parts 0.1,0.25,0.5]

The 17 seeds of the search plus --random settings drawn by Optuna's RandomSampler (seed 37)
from the search space, each measured on the whole trace and on its parts: the prefix through
glibc's peak (what search/fidelity.py uses for peak memory) and the first fractions given.
Memory: HC's footprint, one replay (the harness's figure is the same every run). Time: CPU
ns/op, median of 3 repeats. Prints Spearman's rho (part against whole) per objective and part,
the load average, and the command that reproduces it.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tuner"))

import optuna  # noqa: E402

from hctune import knobs, replay  # noqa: E402
from hctune.search import fidelity, seeds, space  # noqa: E402


def ranks(values):
    order = sorted(range(len(values)), key=lambda i: values[i])
    r = [0.0] * len(values)
    i = 0
    while i < len(order):          # ties share their mean rank
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            r[order[k]] = (i + j) / 2
        i = j + 1
    return r


def spearman(a, b) -> float:
    ra, rb = ranks(a), ranks(b)
    n = len(a)
    ma, mb = sum(ra) / n, sum(rb) / n
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    va = sum((x - ma) ** 2 for x in ra) ** 0.5
    vb = sum((y - mb) ** 2 for y in rb) ** 0.5
    return cov / (va * vb) if va and vb else float("nan")


def settings(n_random: int) -> list[tuple[str, dict]]:
    out = [(label, space.for_search(s)) for label, s in seeds.seeds("mem")]
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=37))
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i in range(n_random):
            t = study.ask()
            out.append((f"random {i}", space.suggest(t)))
            study.tell(t, 0.0)
    seen, uniq = set(), []
    for label, s in out:
        if knobs.key(s) not in seen:
            seen.add(knobs.key(s))
            uniq.append((label, s))
    return uniq


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--random", type=int, default=8)
    ap.add_argument("--parts", default="0.1,0.25,0.5")
    a = ap.parse_args()
    fracs = [float(x) for x in a.parts.split(",")]
    glibc = replay.measure(a.trace, "glibc", repeat=1)
    ops = glibc["ops"]
    peak_part = min(ops, glibc["peak_rss_sample_op"] + int(ops * fidelity.PEAK_MARGIN))
    parts = {"peak prefix": peak_part, **{f"first {f:.0%}": int(ops * f) for f in fracs}}
    load0 = os.getloadavg()[0]
    rows = []
    for label, s in settings(a.random):
        whole_m = replay.measure(a.trace, "hc", s, repeat=1)
        whole_t = replay.measure(a.trace, "hc", s, repeat=3)
        row = {"label": label, "mem": {"whole": whole_m["footprint_bytes"]},
               "time": {"whole": whole_t["time_ns_per_op"]}}
        for name, n in parts.items():
            row["mem"][name] = replay.measure(a.trace, "hc", s, repeat=1, ops=n)["footprint_bytes"]
            row["time"][name] = replay.measure(a.trace, "hc", s, repeat=3,
                                               ops=n)["time_ns_per_op"]
        rows.append(row)
        print(f"  {label:32} footprint {row['mem']['whole'] / 2**20:8.1f} MiB  "
              f"time {row['time']['whole']:6.1f} ns/op", flush=True)
    load1 = os.getloadavg()[0]
    print(f"\ntrace {a.trace}: {ops:,} ops, glibc's peak at op {glibc['peak_rss_sample_op']:,} "
          f"({glibc['peak_rss_sample_op'] / ops:.0%}); {len(rows)} settings; load average "
          f"{load0:.1f} -> {load1:.1f} on {os.cpu_count()} cores")
    print(f"{'part':14} {'ops':>12} {'rho mem':>8} {'rho time':>9}")
    for name, n in parts.items():
        rm = spearman([r["mem"][name] for r in rows], [r["mem"]["whole"] for r in rows])
        rt = spearman([r["time"][name] for r in rows], [r["time"]["whole"] for r in rows])
        print(f"{name:14} {n:12,} {rm:8.3f} {rt:9.3f}")
    print(f"\nreproduce: .venv/bin/python bench/search_fidelity.py {a.trace} --random {a.random} "
          f"--parts {a.parts}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
