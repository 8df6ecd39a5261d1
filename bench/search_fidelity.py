"""How well a part of a trace ranks HC settings as the whole trace does (issue 37; protocol in
docs/lab/search-registration.md, Q1).

    .venv/bin/python bench/search_fidelity.py TRACE [--random 8] [--parts 0.1,0.25,0.5]
                                                    [--mem-only]

The 17 seeds of the search plus --random settings drawn by Optuna's RandomSampler (seed 37)
from the search space, each measured on the whole trace and on its parts: the prefix through
the trace's peak of live bytes and the prefix through glibc's peak (the two markers
search/fidelity.py can use for peak memory), and the first fractions given (--parts "": none).
Memory: HC's footprint and peak RSS, one replay (the harness's figures are the same every run).
Time (not with --mem-only): CPU ns/op, median of 3 repeats. Prints Spearman's rho (part against
whole) per objective and part, the load average, and the command that reproduces it.
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
    ap.add_argument("--mem-only", action="store_true", help="memory only (no time repeats)")
    ap.add_argument("--all-parts", action="store_true",
                    help="also a peak's part that ends past half the trace")
    a = ap.parse_args()
    fracs = [float(x) for x in a.parts.split(",") if x.strip()]
    glibc = replay.measure(a.trace, "glibc", repeat=1)
    ops = glibc["ops"]
    margin = int(ops * fidelity.PEAK_MARGIN)
    events, live_at = fidelity.live_peaks({0: a.trace})[0]
    live_op = -(-live_at * ops // events)
    parts = {"live peak": min(ops, live_op + margin),
             "glibc peak": min(ops, glibc["peak_rss_sample_op"] + margin),
             **{f"first {f:.0%}": int(ops * f) for f in fracs}}
    # a peak's part past half the trace is never used (fidelity.MAX_PART_SHARE): not measured
    # unless --all-parts (it costs nearly a whole replay per setting)
    late = {k: n for k, n in parts.items() if k.endswith("peak") and n > ops *
            fidelity.MAX_PART_SHARE and not a.all_parts}
    for k in late:
        del parts[k]
    load0 = os.getloadavg()[0]
    rows = []
    for label, s in settings(a.random):
        whole_m = replay.measure(a.trace, "hc", s, repeat=1)
        whole_t = None if a.mem_only else replay.measure(a.trace, "hc", s, repeat=3)
        row = {"label": label, "mem": {"whole": whole_m["footprint_bytes"]},
               "rss": {"whole": whole_m["peak_rss_bytes"]},
               "time": {"whole": whole_t and whole_t["time_ns_per_op"]}}
        for name, n in parts.items():
            m = replay.measure(a.trace, "hc", s, repeat=1, ops=n)
            row["mem"][name], row["rss"][name] = m["footprint_bytes"], m["peak_rss_bytes"]
            row["time"][name] = None if a.mem_only else replay.measure(
                a.trace, "hc", s, repeat=3, ops=n)["time_ns_per_op"]
        rows.append(row)
        print(f"  {label:32} footprint {row['mem']['whole'] / 2**20:8.1f} MiB"
              + "".join(f", {k} {row['mem'][k] / 2**20:.1f}" for k in parts)
              + ("" if a.mem_only else f"  time {row['time']['whole']:6.1f} ns/op"), flush=True)
    load1 = os.getloadavg()[0]
    print(f"\ntrace {a.trace}: {events:,} events, {ops:,} ops; live bytes peak at event "
          f"{live_at:,} ({live_at / events:.0%}), glibc's RSS at op "
          f"{glibc['peak_rss_sample_op']:,} ({glibc['peak_rss_sample_op'] / ops:.0%}); "
          f"{len(rows)} settings; load average {load0:.1f} -> {load1:.1f} on "
          f"{os.cpu_count()} cores")
    print(f"{'part':14} {'ops':>12} {'share':>6} {'rho footprint':>14} {'rho peak RSS':>13} "
          f"{'rho time':>9}")

    def rho(key, name):
        if rows[0][key][name] is None:
            return float("nan")
        return spearman([r[key][name] for r in rows], [r[key]["whole"] for r in rows])
    for name, n in parts.items():
        print(f"{name:14} {n:12,} {n / ops:6.0%} {rho('mem', name):14.3f} "
              f"{rho('rss', name):13.3f} {rho('time', name):9.3f}")
    for name, n in late.items():
        print(f"{name:14} {n:12,} {n / ops:6.0%}  not measured: past half the trace, never used")
    print(f"\nreproduce: .venv/bin/python bench/search_fidelity.py {a.trace} --random {a.random} "
          f"--parts '{a.parts}'" + (" --mem-only" if a.mem_only else "")
          + (" --all-parts" if a.all_parts else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
