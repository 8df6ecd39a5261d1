"""`hctune studies`: every study of the database with its trace, objective, trials, best and
the verdict of its latest real-run validation, so no generated name has to be copied."""

from __future__ import annotations

import json

from hctune import realruns
from hctune.db import Database
from hctune.errors import HctuneError
from hctune.search import options as _options
from hctune.search import study as _study


def _best(st, objective: str) -> dict:
    out = {}
    for o in (("mem", "perf") if objective == "pareto" else (objective,)):
        t = _study.choose(st, o)
        if t is not None:
            out[o] = {"trial": t.number, "mem_ratio": t.user_attrs["mem"],
                      "perf_ratio": t.user_attrs["perf"]}
    return out


def studies(db_path) -> list[dict]:
    """One dict per study, oldest first: name, objective, traces [{id, path, command}],
    options, created, trials (finished), failed, feasible, best {mem|perf: {trial, mem_ratio,
    perf_ratio}} (ratios to glibc in replay), memory (what mem_ratio compares: "footprint",
    "peak RSS", "mean RSS" or "final RSS"; Options.mem_name), validation (the latest finished one: id, runs,
    winner, recommendation, verdict; None when not validated), error (a study that cannot be
    opened here, e.g. a server's without its password)."""
    from optuna.trial import TrialState   # deferred: optuna is heavy
    out = []
    with Database(db_path) as db:
        rows = db.studies()
        for row in rows:
            traces = []
            for tid in json.loads(row["trace_ids"]):
                t = db.trace(tid)
                traces.append({"id": tid, "path": t["path"] if t else None,
                               "command": t["command"] if t else None})
            entry = {"name": row["name"], "objective": row["objective"], "traces": traces,
                     "options": json.loads(row["options_json"] or "{}"),
                     "created": row["created"], "trials": None, "failed": None,
                     "feasible": None, "best": {}, "validation": None, "error": None,
                     "memory": _options.mem_name_of(row["options_json"] or "{}")}
            try:
                _, st = _study.load(db, row["name"])
                states = [t.state for t in st.get_trials(deepcopy=False)]
                acc = _study.accounting(st)
                entry.update(trials=states.count(TrialState.COMPLETE), searched=acc,
                             note=_study.searched_note(acc),
                             failed=states.count(TrialState.FAIL),
                             feasible=sum(1 for t in _study.finished(st) if _study.feasible(t)),
                             best=_best(st, row["objective"]))
            except HctuneError as e:
                entry["error"] = str(e)
            v = realruns.latest(db, row["name"])
            if v:
                entry["validation"] = {
                    "id": v.get("validation_id"), "runs": v.get("runs"), "date": v.get("date"),
                    "winner": (v.get("winner") or {}).get("candidate"),
                    "recommendation": (v.get("recommendation") or {}).get("candidate"),
                    "verdict": v.get("verdict")}
            out.append(entry)
    return out
