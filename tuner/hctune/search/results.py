"""What a study found, in numbers a user can judge: `hctune best` and the provenance of `emit`.

The chosen setting is shown beside glibc (the descendant of the paper's DL anchor) and beside
the generic setting (Hasan & Chang 2006, Table 6, measured the way the search measures, i.e.
MONITOR off), on every trace of the study. Generic is measured now if it never was.
"""

from __future__ import annotations

import json

from hctune import knobs as _knobs
from hctune.db import Database
from hctune.errors import HctuneError
from hctune.search import objective as _obj
from hctune.search import space
from hctune.search import study as _study


def study_traces(db: Database, row) -> list[_obj.Trace]:
    out = []
    for tid in json.loads(row["trace_ids"]):
        t = db.trace(tid)
        if t is None:
            raise HctuneError(f"study {row['name']}: trace {tid} is not in the database")
        out.append(_obj.Trace.from_row(t))
    return out


def chosen(db: Database, name: str | None, objective: str | None):
    """(study row, optuna study, objective, trial) for `hctune best/emit --study --objective`."""
    row, st = _study.load(db, name)
    objective = objective or ("mem" if row["objective"] == "pareto" else row["objective"])
    if objective not in ("mem", "perf"):
        raise HctuneError(f"--objective must be mem or perf, not {objective!r}")
    trial = _study.choose(st, objective)
    if trial is None:
        raise HctuneError(f"study {row['name']} has no finished trial"
                          + (" within its limits" if _study.finished(st) else "")
                          + "; run `hctune search` (again)")
    return row, st, objective, trial


def _numbers(res: dict, fields) -> dict:
    return {f: res.get(f) for f in fields}


def _ratio(a, b):
    return a / b if a is not None and b else None


def best(db_path, name: str | None = None, objective: str | None = None,
         measure_fn=None) -> dict:
    """The chosen setting of a study with its measured footprint and time, absolute and
    relative to glibc and to the generic setting, per trace and as a geometric mean."""
    with Database(db_path) as db:
        row, st, objective, trial = chosen(db, name, objective)
        traces = study_traces(db, row)
    opts = json.loads(row["options_json"] or "{}")
    metric = opts.get("metric", "time")
    ev = _obj.Evaluator(db_path, traces, metric=metric, repeat=opts.get("repeat", 3),
                        measure_fn=measure_fn)
    setting = _study.trial_setting(trial)
    generic = space.for_search(_knobs.preset("generic"))
    perf_field = _obj.PERF_FIELDS[metric]
    fields = ["footprint_bytes", "time_ns_per_op", "peak_rss_bytes", "max_live_bytes"]
    if perf_field not in fields:
        fields.append(perf_field)
    per_trace = []
    try:
        for t in traces:
            tuned, _ = ev.measure(t, "hc", setting)
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
        "study": row["name"], "study_objective": row["objective"], "objective": objective,
        "metric": metric, "trial": trial.number, "seed": trial.user_attrs.get("seed"),
        "setting": setting, "changed_from_generic": _knobs.diff_from(setting, generic),
        "traces": per_trace,
        "geomean": {o: {"footprint": gm(o, "footprint"), perf_field: gm(o, perf_field)}
                    for o in ("glibc", "generic")},
    }
