"""The summary of a validation: medians, intervals, ratios, the winner among the HC candidates
on the real measure (mem: peak RSS; perf and pareto: wall time among those within the memory
limit) and the verdict's wording."""

from __future__ import annotations

from hctune import allocators
from hctune import knobs as _knobs
from hctune.search.objective import DEFAULT_PERF_MEMORY_OVERHEAD
from hctune.validate.candidates import Candidate
from hctune.validate.stats import BOOTSTRAP, MEASURES, _median, _values, median_ci, ratio_ci

# perf (and pareto) winners keep peak RSS within this many percent of glibc's unless the study
# or the caller sets another limit (the search's own default for perf, said once there).
DEFAULT_MEMORY_OVERHEAD = DEFAULT_PERF_MEMORY_OVERHEAD


def _span(a: float, b: float) -> str:
    a, b = round(a) + 0, round(b) + 0     # + 0: no "-0"
    return f"{a}–{b} %" if a >= 0 else f"{a} to {b} %"


def _pct(ratio_entry, faster_word="faster", slower_word="slower") -> str:
    """"7 % faster (CI 4–10 %)" from a ratio with its interval (percent of the other side)."""
    r, (lo, hi) = ratio_entry["ratio"], ratio_entry["ci"]
    if r <= 1:
        return f"{(1 - r) * 100:.0f} % {faster_word} (CI {_span((1 - hi) * 100, (1 - lo) * 100)})"
    return f"{(r - 1) * 100:.0f} % {slower_word} (CI {_span((lo - 1) * 100, (hi - 1) * 100)})"


def summarize(cands: list[Candidate], runs: list[dict], objective: str,
              memory_limit: float | None = DEFAULT_MEMORY_OVERHEAD, seed: int = 0,
              memory_vs_generic: bool = False) -> dict:
    """Medians, intervals, ratios, the winner and the verdict from the stored runs (pure: the
    same runs give the same summary). perf/pareto winners keep median peak RSS within
    `memory_limit` % of glibc's (`memory_vs_generic`: of the larger of glibc's and generic
    HC's)."""
    import numpy as np  # deferred: numpy (~0.2 s) only when a summary is computed
    rng = np.random.default_rng(seed)
    by = {c.label: [r for r in runs if r["candidate"] == c.label] for c in cands}
    vals = {c.label: {m: _values(by[c.label], m) for m in MEASURES} for c in cands}
    rows = []
    for c in cands:
        problems = [r["problem"] for r in by[c.label] if r.get("problem")]
        entry = {"candidate": c.label, "kind": c.kind, "allocator": c.allocator,
                 "setting": allocators.setting_key(c.allocator, c.setting) if c.setting else None,
                 "trial": c.trial,
                 "replay": c.replay, "runs": len(vals[c.label]["wall_s"]),
                 "disqualified": problems[0] if problems else None,
                 "median": {}, "ci": {}, "vs_generic": {}, "vs_glibc": {}}
        generic = next((x.setting for x in cands if x.kind == "generic"), None)
        if c.setting is not None and generic is not None and c.allocator == "hc":
            entry["changed_from_generic"] = _knobs.diff_from(c.setting, generic)
        for m in MEASURES:
            xs = list(vals[c.label][m].values())
            entry["median"][m] = _median(xs)
            entry["ci"][m] = median_ci(xs, rng) if xs else [None, None]
            for other, key in (("hc generic", "vs_generic"), ("glibc", "vs_glibc")):
                if other in vals and other != c.label:
                    entry[key][m] = ratio_ci(vals[c.label][m], vals[other][m], rng)
        rows.append(entry)
    measure = "peak_rss_bytes" if objective == "mem" else "wall_s"
    glibc = next((e for e in rows if e["candidate"] == "glibc"), None)
    ok_hc = [e for e in rows if e["kind"] in ("tuned", "generic") and not e["disqualified"]
             and e["median"][measure] is not None]
    notes = []
    eligible = ok_hc
    if measure == "wall_s" and memory_limit is not None and glibc and \
            glibc["median"]["peak_rss_bytes"]:
        base, of = glibc["median"]["peak_rss_bytes"], "glibc's"
        gen = next((e for e in rows if e["kind"] == "generic"), None)
        if memory_vs_generic and gen and gen["median"]["peak_rss_bytes"] and \
                gen["median"]["peak_rss_bytes"] > base:
            base, of = gen["median"]["peak_rss_bytes"], "generic HC's"
        cap = base * (1 + memory_limit / 100)
        within = [e for e in ok_hc if e["median"]["peak_rss_bytes"] <= cap]
        for e in ok_hc:
            if e not in within:
                notes.append(f"{e['candidate']} left out of the choice: peak RSS "
                             f"{e['median']['peak_rss_bytes'] / base:.2f}x {of}, over the "
                             f"+{memory_limit:g} % limit")
        if within:
            eligible = within
        elif ok_hc:
            notes.append("no HC setting is within the memory limit; the fastest is chosen anyway")
    order = {"tuned": 0, "generic": 1}
    winner = min(eligible, key=lambda e: (e["median"][measure], order[e["kind"]],
                                          e["candidate"])) if eligible else None
    verdict, significant = _verdict(winner, rows, measure)
    return {"objective": objective, "measure": measure, "memory_limit_pct": memory_limit,
            "memory_limit_of": "max(glibc, generic HC)" if memory_vs_generic else "glibc",
            "candidates": rows,
            "winner": None if winner is None else {
                "candidate": winner["candidate"], "kind": winner["kind"],
                "allocator": winner["allocator"],
                "setting": winner["setting"], "trial": winner["trial"]},
            "significant": significant, "verdict": verdict, "notes": notes,
            "interval": "95 %: percentile bootstrap of the median; ratios: median over median, "
                        f"paired bootstrap over rounds ({BOOTSTRAP} resamples)"}


def _verdict(winner, rows, measure) -> tuple[str, bool]:
    what = "smaller (peak RSS)" if measure == "peak_rss_bytes" else "faster (wall time)"
    word = "smaller" if measure == "peak_rss_bytes" else "faster"
    bigger = "larger" if measure == "peak_rss_bytes" else "slower"
    if winner is None:
        if not any(e["kind"] in ("tuned", "generic") for e in rows):
            return "no HC setting among the candidates", False
        return "every HC setting was disqualified: none can be recommended for this program", False
    tuned = [e for e in rows if e["kind"] == "tuned"]
    parts, significant = [], False
    if winner["kind"] == "tuned":
        vs = winner["vs_generic"].get(measure)
        if vs and vs["ci"][1] < 1:
            significant = True
            parts.append(f"{winner['candidate']} beats generic HC: {_pct(vs, word, bigger)}")
        elif vs:
            parts.append(f"no setting is significantly {what.split()[0]} than generic HC on this "
                         f"program (best: {winner['candidate']}, {_pct(vs, word, bigger)})")
        else:
            parts.append(f"{winner['candidate']} is best; generic HC could not be compared")
    elif tuned:
        parts.append(f"no tuned setting is {word} than generic HC on this program; "
                     "generic HC is the choice")
    else:
        parts.append("generic HC is the choice")
    g = winner["vs_glibc"].get(measure)
    if g:
        if g["ci"][1] < 1:
            parts.append(f"vs glibc: {_pct(g, word, bigger)}")
        elif g["ci"][0] > 1:
            parts.append(f"vs glibc: {_pct(g, word, bigger)}")
        else:
            parts.append(f"not significantly different from glibc ({g['ratio']:.2f}x, CI "
                         f"{g['ci'][0]:.2f}–{g['ci'][1]:.2f})")
    better = []
    wv = {e["candidate"]: e for e in rows}
    for e in rows:
        if e["kind"] == "reference" and e["candidate"] != "glibc" and not e["disqualified"]:
            a = e["median"][measure]
            if a is not None and winner["median"][measure] and e["ci"][measure][1] is not None \
                    and e["ci"][measure][1] < wv[winner["candidate"]]["ci"][measure][0]:
                better.append(f"{e['candidate']} ({a / winner['median'][measure]:.2f}x)")
    if better:
        parts.append(f"{', '.join(better)} {'is' if len(better) == 1 else 'are'} "
                     f"{word} still")
    return "; ".join(parts), significant
