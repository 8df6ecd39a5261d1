"""The summary of a validation: medians, intervals, ratios, the recommendation and the HC
winner (both by the one rule, `hctune.validate.rule.recommend`) on the real measure (mem: peak
RSS; perf and pareto: wall time among those within the memory limit) and the verdict."""

from __future__ import annotations

import os
import zlib

from hctune import allocators
from hctune import knobs as _knobs
from hctune.search.objective import DEFAULT_PERF_MEMORY_OVERHEAD, REAL_MEMORY_FIELDS
from hctune.validate.candidates import Candidate
from hctune.validate import rule
from hctune.validate.stats import (BOOTSTRAP, CURVE_MEASURES, MEASURES, _median, _values,
                                   median_ci, ratio_ci)

# perf (and pareto) winners keep peak RSS within this many percent of glibc's unless the study
# or the caller sets another limit (the search's own default for perf, said once there).
DEFAULT_MEMORY_OVERHEAD = DEFAULT_PERF_MEMORY_OVERHEAD



def _span(a: float, b: float) -> str:
    return rule.span(a, b)


def _pct(ratio_entry, faster_word="faster", slower_word="slower") -> str:
    return rule.pct(ratio_entry, faster_word, slower_word)


# perf and pareto choose on wall time, or with --time-measure cpu on the program's user + sys
# CPU time (hcrun's rusage of the child): on a machine loaded by other work a single-threaded
# program's wall time adds the time it waits for a core, its CPU time does not
TIME_MEASURES = {"wall": "wall_s", "cpu": "cpu_s"}

DOMINATES = 5.0     # %: a smaller gain on the other measure is not worth a line of the verdict
OTHER = {"wall_s": "peak_rss_bytes", "cpu_s": "peak_rss_bytes", "peak_rss_bytes": "wall_s", "rss_mean_bytes": "wall_s",
         "rss_final_bytes": "wall_s"}
WORDS = {"wall_s": ("faster", "slower"), "cpu_s": ("faster in CPU time", "slower in CPU time"), "peak_rss_bytes": ("smaller", "larger"),
         "rss_mean_bytes": ("smaller on average", "larger on average"),
         "rss_final_bytes": ("smaller at the end", "larger at the end")}


def _pairs(vals: dict, seed: int):
    """ratio(a, b, measure): a's median over b's with its paired-bootstrap interval, computed
    once per pair, each pair with its own generator (the same runs give the same numbers,
    whichever pairs a verdict happens to ask about first)."""
    import numpy as np  # deferred: numpy (~0.2 s) only when a ratio is computed
    cache = {}

    def ratio(a, b, m):
        k = (a["candidate"], b["candidate"], m)
        if k not in cache:
            rng = np.random.default_rng([seed, zlib.crc32("\0".join(k).encode())])
            cache[k] = ratio_ci(vals[k[0]][m], vals[k[1]][m], rng) if k[0] != k[1] else None
        return cache[k]
    return ratio


def _cap(rows, measure, memory_limit, memory_vs_generic):
    """(largest eligible median peak RSS in bytes, its base, whose) for perf; (None, ...) else."""
    glibc = next((e for e in rows if e["candidate"] == "glibc"), None)
    if measure not in TIME_MEASURES.values() or memory_limit is None or not glibc or \
            not glibc["median"]["peak_rss_bytes"]:
        return None, None, None
    base, of = glibc["median"]["peak_rss_bytes"], "glibc's"
    gen = next((e for e in rows if e["kind"] == "generic"), None)
    if memory_vs_generic and gen and gen["median"]["peak_rss_bytes"] and \
            gen["median"]["peak_rss_bytes"] > base:
        base, of = gen["median"]["peak_rss_bytes"], "generic HC's"
    return base * (1 + memory_limit / 100), base, of


def _time_cap(rows, max_slowdown):
    """(largest eligible median wall time, glibc's, whose) for mem with a --max-slowdown (the
    study's: the search's constraint, kept in the real runs); (None, ...) else."""
    glibc = next((e for e in rows if e["candidate"] == "glibc"), None)
    if max_slowdown is None or not glibc or not glibc["median"].get("wall_s"):
        return None, None, None
    base = glibc["median"]["wall_s"]
    return base * (1 + max_slowdown / 100), base, "glibc's"


def summarize(cands: list[Candidate], runs: list[dict], objective: str,
              memory_limit: float | None = DEFAULT_MEMORY_OVERHEAD, seed: int = 0,
              memory_vs_generic: bool = False, memory_measure: str = "peak",
              max_slowdown: float | None = None, time_measure: str = "wall",
              min_effect: float = rule.MIN_EFFECT) -> dict:
    """Medians, intervals, ratios, the recommendation, the HC winner and the verdict from the
    stored runs (pure: the same runs give the same summary). perf/pareto choices keep median
    peak RSS within `memory_limit` % of glibc's (`memory_vs_generic`: of the larger of glibc's
    and generic HC's). `recommendation` is the rule over every candidate (it can be glibc or
    another allocator); `winner` is the rule over the HC candidates: what `emit` writes.
    `memory_measure` (the study's --memory-measure): mem's measure, the peak RSS, or the mean
    or the final RSS of the runs' RSS curve. `max_slowdown` (the study's --max-slowdown): mem
    choices keep median wall time within this many percent of glibc's. `time_measure` (wall |
    cpu): perf's and pareto's measure, the wall time or the program's user + sys CPU time.
    `min_effect` (%): a significant gain smaller than this keeps the simpler option."""
    import numpy as np  # deferred: numpy (~0.2 s) only when a summary is computed
    rng = np.random.default_rng(seed)
    curve_rng = np.random.default_rng(seed + 1)
    by = {c.label: [r for r in runs if r["candidate"] == c.label] for c in cands}
    vals = {c.label: {m: _values(by[c.label], m) for m in MEASURES + CURVE_MEASURES}
            for c in cands}
    ratio = _pairs(vals, seed)
    rows = []
    generic = next((x.setting for x in cands if x.kind == "generic"), None)
    for c in cands:
        problems = [r["problem"] for r in by[c.label] if r.get("problem")]
        entry = {"candidate": c.label, "kind": c.kind, "allocator": c.allocator,
                 "setting": allocators.setting_key(c.allocator, c.setting) if c.setting else None,
                 "trial": c.trial,
                 "replay": c.replay, "runs": len(vals[c.label]["wall_s"]),
                 "disqualified": problems[0] if problems else None,
                 "median": {}, "ci": {}, "vs_generic": {}, "vs_glibc": {}}
        if c.origin:
            entry["origin"] = c.origin
        if c.setting is not None and generic is not None and c.is_hc:
            entry["changed_from_generic"] = _knobs.diff_from(c.setting, generic)
        if c.kind == "generic" and c.setting is not None:
            # the search's generic HC holds its fixed knobs (ARENAS=1 on a single-threaded
            # trace): not the build/libhcmalloc.so of Table 6 as the paper gives it, so named
            # apart wherever the two can meet
            from hctune.search import space  # deferred: Optuna (the search's fixed knobs)
            fixed = space.fixed_values()
            held = {k: v for k, v in _knobs.diff_from(_knobs.complete(c.setting),
                                                      _knobs.preset("generic")).items()
                    if fixed.get(k) == v}
            if held:
                entry["as_searched"] = ", ".join(f"{k}={v}" for k, v in held.items())
        for m in MEASURES:
            xs = list(vals[c.label][m].values())
            entry["median"][m] = _median(xs)
            entry["ci"][m] = median_ci(xs, rng) if xs else [None, None]
        # the RSS curve hcrun samples (time-weighted mean, RSS left at the end): shown, not yet
        # a measure the rule chooses by; its own random stream leaves the other intervals as
        # they were
        for m in CURVE_MEASURES:
            xs = [r[m] for r in by[c.label] if r.get("problem") is None and r.get(m) is not None]
            if xs:
                entry["median"][m] = _median(xs)
                entry["ci"][m] = median_ci(xs, curve_rng)
        rows.append(entry)
    by_label = {e["candidate"]: e for e in rows}
    for e in rows:
        for other, key in (("hc generic", "vs_generic"), ("glibc", "vs_glibc")):
            if other in by_label and other != e["candidate"]:
                for m in MEASURES + CURVE_MEASURES:
                    if e["median"].get(m) is not None:
                        e[key][m] = ratio(e, by_label[other], m)
    timed = objective != "mem"
    measure = TIME_MEASURES[time_measure] if timed else REAL_MEMORY_FIELDS[memory_measure]
    cap, base, of = _cap(rows, measure, memory_limit, memory_vs_generic)
    cap_field, limit, limit_pct = "peak_rss_bytes", "memory limit", memory_limit
    if not timed:
        cap, base, of = _time_cap(rows, max_slowdown)
        cap_field, limit, limit_pct = "wall_s", "time limit", max_slowdown
    # HC's settings (another allocator's tuned setting from a search across allocators is kind
    # tuned too, but has no malloc.c: it competes in the recommendation only)
    built = {c.label for c in cands if c.is_hc}      # what malloc.c can hold
    hc = rule.recommend([e for e in rows if e["candidate"] in built], measure, ratio, cap,
                        cap_field, min_effect)
    overall = rule.recommend(rows, measure, ratio, cap, cap_field, min_effect)
    notes = []
    for e in overall["over_cap"]:
        e["over_memory_limit" if cap_field == "peak_rss_bytes" else "over_time_limit"] = True
        what = "peak RSS" if cap_field == "peak_rss_bytes" else "wall time"
        notes.append(f"{e['candidate']} left out of the choice: {what} "
                     f"{e['median'][cap_field] / base:.2f}x {of}, over the "
                     f"+{limit_pct:g} % limit")
    if cap is not None and not hc["capped"] and hc["choice"] is not None:
        notes.append(f"no HC setting is within the {limit}; the HC choice ignores it")
    winner, rec = hc["choice"], overall["choice"]
    if rec is not None and rec["candidate"] in built:
        winner = rec          # the answer is an HC setting: emit writes that one
    if rec is not None:
        for e in rows:
            e["vs_recommended"] = {m: ratio(e, rec, m)
                                   for m in dict.fromkeys(("wall_s", "peak_rss_bytes", measure))
                                   if e is not rec}
    gen_row = next((e for e in rows if e["kind"] == "generic"), None)
    significant = bool(winner and winner["kind"] == "tuned" and gen_row is not None
                       and rule.significantly_better(ratio(winner, gen_row, measure)))
    verdict = _verdict(rows, measure, hc, overall, ratio, limit, min_effect)
    dom = _dominating(rows, measure, rec, ratio, cap, cap_field)
    if dom:
        verdict += "; " + dom

    def brief(e):
        return None if e is None else {
            "candidate": e["candidate"], "kind": e["kind"], "allocator": e["allocator"],
            "setting": e["setting"], "trial": e["trial"], "simplicity": rule.simplicity(e),
            **({"origin": e["origin"]} if e.get("origin") else {})}
    return {"objective": objective, "measure": measure, "memory_measure": memory_measure,
            "memory_limit_pct": memory_limit,
            "memory_limit_of": "max(glibc, generic HC)" if memory_vs_generic else "glibc",
            "time_limit_pct": max_slowdown if not timed else None,
            "time_measure": time_measure if timed else None, "min_effect_pct": min_effect,
            "candidates": rows, "winner": brief(winner), "recommendation": brief(rec),
            "best_measured": overall["best"]["candidate"] if overall["best"] else None,
            "significant": significant, "verdict": verdict, "notes": notes,
            "rule": "the recommendation must win significantly (95 % interval of its ratio wholly "
                    f"below 1, median at least {min_effect:g} % better) over every simpler "
                    "option (glibc; then an allocator as it comes, generic HC included; then a tuned setting); else the simpler option stands",
            "interval": "95 %: percentile bootstrap of the median; ratios: median over median, "
                        f"paired bootstrap over rounds ({BOOTSTRAP} resamples)"}


def name(e: dict) -> str:
    """How a verdict names a candidate the first time: with its allocator and trial."""
    if e["kind"] == "generic":
        return "generic HC" + (f" (as searched: {e['as_searched']})" if e.get("as_searched")
                               else "")
    if e["kind"] == "tuned":
        o = e.get("origin")
        trial = (f", trial {o['trial']} of study {o['study']}" if o
                 else f", trial {e['trial']}" if e["trial"] is not None else "")
        return f"{e['candidate']} ({allocators.of(e['allocator']).tag}{trial})"
    return e["candidate"]


def short(e: dict) -> str:
    """How a verdict names a candidate again."""
    return "generic HC" if e["kind"] == "generic" else e["candidate"]


def _verdict(rows, measure, hc, overall, ratio, limit="memory limit",
             min_effect: float = rule.MIN_EFFECT) -> str:
    """What to use and why, in one line: the recommendation with its gain over the simpler
    options, the better-looking candidate it was preferred to, every reference whose median
    beat it (with its interval), and what `emit` writes when the answer is not HC."""
    better, worse = WORDS[measure]
    rec, best, winner = overall["choice"], overall["best"], hc["choice"]
    if rec is None:
        return "every candidate was disqualified: none can be recommended for this program"
    label = {e["candidate"]: e for e in rows}
    glibc, generic = label.get("glibc"), next((e for e in rows if e["kind"] == "generic"), None)
    parts = []
    if rule.simplicity(rec) == rule.SIMPLEST:
        head = ("keep glibc: no allocator" + (f" within the {limit}" if overall["over_cap"]
                                               else "")
                + f" was significantly {better} on this program"
                + (f" by {min_effect:g} % or more" if overall.get("small") else ""))
    else:
        gains = []
        base = next((e for e in rows if e["allocator"] == rec["allocator"]
                     and rule.simplicity(e) == rule.AS_IT_COMES), None) \
            if rec["kind"] == "tuned" else None
        for other in (base, glibc):
            r = ratio(rec, other, measure) if other is not None and other is not rec else None
            if r:
                gains.append(rule.pct(r, better, worse, name(other)))
        head = f"use {name(rec)}" + (": " + ", ".join(gains) if gains else "")
    parts.append(head)
    if best is not None and best is not rec:
        r = ratio(best, rec, measure)
        if r and best in overall.get("small", ()):
            parts.append(f"{name(best)} was {rule.pct(r, better, worse, short(rec))}: "
                         f"significant but under the {min_effect:g} % minimum effect, no "
                         "difference worth acting on, so the simpler option stands")
        elif r:
            parts.append(f"{name(best)} was {rule.pct(r, better, worse, short(rec))}, "
                         "not a significant difference, so the simpler option stands")
    for e in rows:
        if e is rec or e is best or e["kind"] not in ("reference", "extra") or \
                e.get("disqualified") or e["median"].get(measure) is None or \
                e["median"][measure] >= rec["median"][measure]:
            continue
        r = ratio(e, rec, measure)
        if not r:
            continue
        why = (f" but over the {limit}" if e in overall["over_cap"]
               else "" if rule.significantly_better(r) else ", not significantly")
        parts.append(f"{e['candidate']} was {rule.pct(r, better, worse, short(rec))}{why}")
    if winner is not None and winner is not rec:
        r = ratio(winner, rec, measure)
        parts.append(f"the best HC setting, {name(winner)}, is what emit writes"
                     + (f": {rule.pct(r, better, worse, short(rec))}" if r else ""))
    elif winner is None and rec["kind"] not in ("tuned", "generic"):
        parts.append("every HC setting was disqualified")
    return "; ".join(parts)


def _dominating(rows, measure, rec, ratio, cap, cap_field="peak_rss_bytes") -> str | None:
    """A candidate that is not significantly worse than the recommendation on its measure and
    significantly better on the other one, by DOMINATES % at least (a setting from the other
    objective's study, say)."""
    if rec is None:
        return None
    other = OTHER[measure]
    found = []
    for e in rows:
        if e is rec or e.get("disqualified") or e["median"].get(measure) is None:
            continue
        if cap is not None and (e["median"].get(cap_field) or 0) > cap:
            continue
        r_m, r_o = ratio(e, rec, measure), ratio(e, rec, other)
        if r_m and r_o and r_m["ci"][0] <= 1 and rule.significantly_better(r_o) and \
                r_o["ratio"] <= 1 - DOMINATES / 100:
            found.append((r_o["ratio"], e, r_m, r_o))
    if not found:
        return None
    _, e, r_m, r_o = min(found, key=lambda f: (f[0], f[1]["candidate"]))
    return (f"consider {name(e)}: {rule.pct(r_m, *WORDS[measure], short(rec))} and "
            f"{rule.pct(r_o, *WORDS[other], short(rec))}")


def add_headroom(summary: dict, max_live_bytes: int | None) -> dict:
    """Each candidate's peak_rss_over_live (its median peak RSS over the traces' peak live
    bytes, the physical limit: no allocator's heap can hold less) and the verdict's distance
    from it (docs/profile-guided.md).  The program's own non-heap memory (code, stacks) is in the
    RSS: the ratio is an upper bound on what any allocator could still gain."""
    if not max_live_bytes:
        return summary
    summary["max_live_bytes"] = int(max_live_bytes)
    for e in summary["candidates"]:
        rss = e["median"].get("peak_rss_bytes")
        e["peak_rss_over_live"] = round(rss / max_live_bytes, 4) if rss else None
    chosen = summary.get("recommendation") or summary.get("winner")
    row = next((e for e in summary["candidates"]
                if chosen and e["candidate"] == chosen["candidate"]), None)
    if row is not None and row.get("peak_rss_over_live"):
        r = row["peak_rss_over_live"]
        left = max(0.0, 1 - 1 / r) * 100
        summary["verdict"] += (f"; its peak RSS is {r:.2f}x your program's peak live data: at most "
                               f"{left:.0f} % left to gain by any allocator")
    return summary


# ---- how much to trust a time verdict ----

# a time ratio whose 95 % interval is wider than this (in points of the ratio) says little: the
# demo on a loaded 2-core machine gave "30 % slower than glibc (CI -45 to 138 %)"
WIDE_INTERVAL = 0.25


def load_summary(loads: list[float], cores: int | None = None) -> dict:
    """The 1-minute load average sampled before and after every real run: its median and most,
    beside the machine's core count (a load above the cores: programs waited for a core)."""
    cores = cores or os.cpu_count() or 1
    xs = sorted(loads)
    return {"median": _median(xs), "max": xs[-1] if xs else None, "cores": cores,
            "busy": bool(xs) and _median(xs) > cores}


def load_notes(s: dict) -> list[str]:
    """Notes for a time verdict that cannot be trusted much: the machine was busy during the
    runs, or a time interval is so wide it spans large gains and losses at once."""
    timed = s.get("measure") in TIME_MEASURES.values()
    wall = s.get("measure") != "cpu_s"
    load = s.get("load") or {}
    wide = []
    for e in s["candidates"]:
        r = e.get("vs_glibc", {}).get("wall_s")
        if r and not e.get("disqualified") and r["ci"][1] - r["ci"][0] > WIDE_INTERVAL:
            ci = rule.span((r["ci"][0] - 1) * 100, (r["ci"][1] - 1) * 100)
            wide.append(f"{e['candidate']} {ci}")
    out = []
    why = []
    if load.get("busy"):
        why.append(f"the machine was busy during the runs (load average {load['median']:.1f}, "
                   f"up to {load['max']:.1f}, on {load['cores']} cores)")
    if wide:
        why.append("the wall-time intervals are wide (vs glibc: " + ", ".join(wide[:3])
                   + (", ..." if len(wide) > 3 else "") + ")")
    if why:
        hint = ("rerun with --time-measure cpu (CPU time does not count the wait for a core) "
                "or more --runs" if wall else "rerun with more --runs, on a quieter machine")
        out.append(("time verdicts are unsure: " if timed else "wall times are unsure (the "
                    "memory verdict is not): ") + " and ".join(why) + "; " + hint)
    return out
