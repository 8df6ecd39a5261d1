"""The 5-minute search's best against a long reference search's (issue 37; protocol in
docs/lab/search-registration.md, Q3).

    .venv/bin/python bench/search_quality.py SHORT.db REFERENCE.db [--at 300]

Both databases come from `bench/search_rate.py TRACE SECONDS --only after --seed N --keep DIR`
(SECONDS 300 for the short search, as long as the time allows for the reference, another seed).
Prints, for each, the trials evaluated (finished + pruned), sampled and whole, the best
finished trial's value (HC's footprint over glibc's), and the reference's own best within its
first --at seconds; then the short best over the reference's best, minus 1 (the issue's bar:
within 1 %).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from search_rate import counts  # noqa: E402


def best_within(db: Path, seconds: float):
    import optuna
    from optuna.trial import TrialState
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    url = f"sqlite:///{db}"
    (name,) = [s.study_name for s in optuna.get_all_study_summaries(url)]
    ts = optuna.load_study(study_name=name, storage=url).trials
    t0 = min(t.datetime_start for t in ts if t.datetime_start)
    done = [t for t in ts if t.state == TrialState.COMPLETE and "mem" in t.user_attrs
            and (t.datetime_complete - t0).total_seconds() <= seconds]
    return min((t.user_attrs["mem"] for t in done), default=None)


def seeds_and_sampled(db: Path):
    """The best finished seed's value, the best finished sampled trial's, and how many sampled
    trials beat every seed: what the sampler added over the seeds."""
    import optuna
    from optuna.trial import TrialState
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    url = f"sqlite:///{db}"
    (name,) = [s.study_name for s in optuna.get_all_study_summaries(url)]
    done = [t for t in optuna.load_study(study_name=name, storage=url).trials
            if t.state == TrialState.COMPLETE and "mem" in t.user_attrs]
    seeds = [t.user_attrs["mem"] for t in done if "seed" in t.user_attrs]
    sampled = [t.user_attrs["mem"] for t in done if "seed" not in t.user_attrs]
    best_seed = min(seeds, default=None)
    beat = sum(best_seed is not None and v < best_seed for v in sampled)
    return best_seed, min(sampled, default=None), beat, len(sampled)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("short")
    ap.add_argument("reference")
    ap.add_argument("--at", type=float, default=300)
    a = ap.parse_args()
    s, r = counts(Path(a.short)), counts(Path(a.reference))
    print(f"{'':10} {'evaluated':>9} {'sampled':>8} {'whole':>6} {'pruned':>7} {'best':>8}")
    for tag, c in (("short", s), ("reference", r)):
        print(f"{tag:10} {c['evaluated']:9} {c['sampled']:8} {c['finished']:6} {c['pruned']:7} "
              f"{c['best']:8.4f}")
    for tag, db in (("short", a.short), ("reference", a.reference)):
        bs, bp, beat, n = seeds_and_sampled(Path(db))
        fmt = (lambda v: "none" if v is None else f"{v:.4f}")  # noqa: E731
        print(f"{tag}: best seed {fmt(bs)}, best sampled {fmt(bp)}; {beat} of {n} sampled "
              f"trials measured whole beat every seed")
    early = best_within(Path(a.reference), a.at)
    print(f"reference's best within its first {a.at:g} s of trials: "
          f"{'none' if early is None else f'{early:.4f}'}")
    gap = s["best"] / r["best"] - 1
    print(f"short best / reference best - 1 = {gap:+.2%} "
          f"({'within' if gap <= 0.01 else 'not within'} 1 %)")
    print(f"\nreproduce: .venv/bin/python bench/search_quality.py {a.short} {a.reference} "
          f"--at {a.at:g}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
