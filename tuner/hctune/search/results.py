"""What a study found, in numbers a user can judge: `hctune best` and the provenance of `emit`.

The chosen setting is shown beside glibc (the descendant of the paper's DL anchor) and beside
the generic setting (Hasan & Chang 2006, Table 6, measured the way the search measures, i.e.
MONITOR off), on every trace of the study. Generic is measured now if it never was.
"""

from __future__ import annotations

import json

from hctune import allocators
from hctune import knobs as _knobs
from hctune.db import Database
from hctune.search import answer as _answer
from hctune.search import fitted as _fit
from hctune.search import objective as _obj
from hctune.search import options as _options
from hctune.search import space
from hctune.search import study as _study
from hctune.search.answer import chosen, study_for, study_traces  # noqa: F401 (their old home)


def tradeoff(st, row, objective: str) -> dict | None:
    """What the limits cost: the fastest (or smallest) finished trial ignoring the study's
    limits, beside the chosen one, when they differ (the perf default keeps peak RSS within
    +10 % of glibc's; `best` shows what lifting that would buy and cost)."""
    done = _study.finished(st)
    chosen_t = _study.choose(st, objective)
    if not done or chosen_t is None:
        return None
    free = min(done, key=lambda t: (t.user_attrs[objective], t.number))
    if free.number == chosen_t.number:
        return None

    def worst_rss(t):
        return max((e.get("rss_ratio", 0) for e in t.user_attrs.get("per_trace", [])), default=None)
    opts = json.loads(row["options_json"] or "{}")
    return {"limits": {"max_memory_overhead": opts.get("max_memory_overhead"),
                       "max_slowdown": opts.get("max_slowdown")},
            "unconstrained": {"trial": free.number, "mem_ratio": free.user_attrs["mem"],
                              "perf_ratio": free.user_attrs["perf"], "rss_ratio": worst_rss(free)},
            "chosen": {"trial": chosen_t.number, "mem_ratio": chosen_t.user_attrs["mem"],
                       "perf_ratio": chosen_t.user_attrs["perf"],
                       "rss_ratio": worst_rss(chosen_t)}}


def _numbers(res: dict, fields) -> dict:
    return {f: res.get(f) for f in fields}


def _ratio(a, b):
    return a / b if a is not None and b else None


def best(db_path, name: str | None = None, objective: str | None = None,
         measure_fn=None) -> dict:
    """The chosen setting of a study with its measured footprint and time, absolute and
    relative to glibc and to the generic setting, per trace and as a geometric mean."""
    with Database(db_path) as db:
        ans = _answer.decide(db, name, objective)
        traces = study_traces(db, ans.row)
    row, st, objective, real = ans.row, ans.study, ans.objective, ans.validation
    replay_best = ans.replay_best.number
    opts = json.loads(row["options_json"] or "{}")
    metric = opts.get("metric", "time")
    # the study's own repeats, so its measurements are reused (a mem study's are one replay)
    repeat, until = _study.measure_repeats(_options.Options(
        objective=row["objective"], metric=metric, repeat=opts.get("repeat", 3),
        max_slowdown=opts.get("max_slowdown")))
    ev = _obj.Evaluator(db_path, traces, metric=metric, repeat=repeat, until_spread=until,
                        measure_fn=measure_fn)
    w = ans.winner
    alloc, setting, trial = w.allocator, w.setting, w.trial
    generic = space.for_search(_knobs.preset("generic"))
    perf_field = _obj.PERF_FIELDS[metric]
    fields = ["footprint_bytes", "time_ns_per_op", "peak_rss_bytes", "max_live_bytes"]
    if perf_field not in fields:
        fields.append(perf_field)
    per_trace = []
    try:
        for t in traces:
            tuned, _ = ev.measure(t, alloc, setting)
            gen, _ = ev.measure(t, "hc", generic)
            glibc = ev.baseline(t)
            entry = {"trace": t.path, "command": t.command,
                     "tuned": _numbers(tuned, fields), "generic": _numbers(gen, fields),
                     "glibc": _numbers(glibc, fields)}
            for other in ("glibc", "generic"):
                entry[f"vs_{other}"] = {
                    "footprint": _ratio(tuned.get("footprint_bytes"),
                                        entry[other]["footprint_bytes"]),
                    perf_field: _ratio(tuned.get(perf_field), entry[other][perf_field])}
            per_trace.append(entry)
    finally:
        ev.close()

    def gm(other, f):
        vals = [e[f"vs_{other}"][f] for e in per_trace]
        return _obj.geomean(vals) if all(vals) else None

    return {
        "validation": real, "chosen_by": "real runs" if real is not None else "replay",
        "replay_best_trial": replay_best, "tradeoff": tradeoff(st, row, objective),
        # what the search measured: a search of only seeds says so in the verdict
        "searched": _study.accounting(st), "note": _study.searched_note(_study.accounting(st)),
        "study": row["name"], "study_objective": row["objective"], "objective": objective,
        "metric": metric, "trial": w.number,
        # the trial's own study when the winner came from another (the other objective's best)
        "trial_study": w.origin["study"] if w.origin else row["name"],
        # what the first line names: the verdict's answer (the recommendation over every
        # candidate once validated), which can be another allocator than this HC winner
        "answer": {"label": ans.answer.label(), "allocator": ans.answer.allocator,
                   "trial": ans.answer.number,
                   "study": ans.answer.origin["study"] if ans.answer.origin else row["name"]},
        # what the trials' mem_ratio compares (the trade-off's): footprint, peak/mean/final RSS
        "memory": _options.mem_name_of(row["options_json"] or "{}"),
        "seed": trial.user_attrs.get("seed") if trial is not None else None,
        "allocator": alloc, "setting": setting,
        "changed_from_generic": allocators.family(alloc).changed(setting, generic),
        # size classes fitted to the study's traces (search/fitted.py), when the setting has them
        **({"fitted_classes": _fit.describe(setting)}
           if allocators.of(alloc).fits_tables and _fit.describe(setting) else {}),
        "traces": per_trace,
        # a search across allocators: each allocator's best trial and its defaults (vs glibc)
        **({"per_allocator": _study.per_allocator(st, objective)}
           if any("allocator" in t.user_attrs for t in _study.finished(st)) else {}),
        "geomean": {o: {"footprint": gm(o, "footprint"), perf_field: gm(o, perf_field)}
                    for o in ("glibc", "generic")},
    }
