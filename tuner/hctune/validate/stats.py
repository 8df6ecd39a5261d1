"""Statistics of the real runs: medians with percentile bootstrap intervals, and ratios of
medians with a paired bootstrap over rounds."""

from __future__ import annotations

BOOTSTRAP = 2000
MEASURES = ("wall_s", "cpu_s", "peak_rss_bytes")
# the RSS curve of a run (hcrun's samples): its time-weighted mean and the RSS at the end;
# shown when measured, and mem's measure with the study's --memory-measure mean|final
CURVE_MEASURES = ("rss_mean_bytes", "rss_final_bytes")


def _median(xs):
    xs = sorted(xs)
    n = len(xs)
    return None if n == 0 else (xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2)


def median_ci(xs, rng, level=0.95, b=BOOTSTRAP):
    """Percentile bootstrap interval of the median."""
    import numpy as np  # deferred: numpy (~0.2 s) only when a summary is computed
    a = np.asarray(xs, dtype=float)
    if len(a) < 2:
        return [float(a[0]), float(a[0])] if len(a) else [None, None]
    meds = np.median(a[rng.integers(0, len(a), size=(b, len(a)))], axis=1)
    lo, hi = np.quantile(meds, [(1 - level) / 2, (1 + level) / 2])
    return [float(lo), float(hi)]


def ratio_ci(a_by_round: dict, b_by_round: dict, rng, level=0.95, b=BOOTSTRAP):
    """median(a) / median(b) with a paired percentile bootstrap over the rounds both ran: each
    resample draws rounds with replacement and takes both sides' values from the same rounds,
    so a burst of load that slowed one round weighs on both sides alike."""
    import numpy as np  # deferred: numpy (~0.2 s) only when a summary is computed
    rounds = sorted(set(a_by_round) & set(b_by_round))
    if not rounds:
        return None
    a = np.asarray([a_by_round[r] for r in rounds], dtype=float)
    bb = np.asarray([b_by_round[r] for r in rounds], dtype=float)
    if np.median(bb) <= 0:
        return None
    ratio = float(np.median(a) / np.median(bb))
    if len(rounds) < 2:
        return {"ratio": ratio, "ci": [ratio, ratio], "rounds": len(rounds)}
    idx = rng.integers(0, len(rounds), size=(b, len(rounds)))
    den = np.median(bb[idx], axis=1)
    boots = np.median(a[idx], axis=1) / np.where(den > 0, den, np.nan)
    lo, hi = np.nanquantile(boots, [(1 - level) / 2, (1 + level) / 2])
    return {"ratio": ratio, "ci": [float(lo), float(hi)], "rounds": len(rounds)}


def _values(runs: list[dict], measure: str) -> dict:
    """{round: value} of a candidate's good runs."""
    out = {}
    for r in runs:
        if r.get("problem") is None and r.get("wall_s") is not None:
            v = (r["user_s"] + r["sys_s"]) if measure == "cpu_s" else r.get(measure)
            if v is not None:     # a curve figure of a run shorter than one sample: none
                out[r["round"]] = v
    return out
