"""The studies of `hctune serve`: queue one (StudyRequest), list them, one with its summary,
comparison and validation, and its trials for a polling page (ETag, `since`). The server never
runs a search: `hctune worker` takes the queued study (hctune.jobs.runner)."""

from __future__ import annotations

import csv
import io
import json
import re
import secrets
from pathlib import Path
from urllib.parse import quote
from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi import Path as PathParam
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field, Strict, create_model

from hctune import allocator_knobs as _xknobs
from hctune import allocators
from hctune import jobs
from hctune.errors import HctuneError
from hctune.search import objective as _obj
from hctune.search import options as _options
from hctune.search import study as _study
from hctune.serve.auth import need_token
from hctune.serve import views
from hctune.serve.state import Service, _finite, allocators_searched, service, study_brief
from hctune import emit as _emit
from hctune import knobs as _knobs
from hctune.serve.trials import changed_from_generic
from hctune.trace import store
from hctune import report as _report

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")

router = APIRouter(tags=["studies"])


MAX_ID = 2**63 - 1   # the database's integer columns
TraceId = Annotated[int, Strict(), Field(ge=1, le=MAX_ID)]   # (true is not 1)


def _request_model() -> type[BaseModel]:
    """StudyRequest: the traces and name of a new study, and the user's options of
    hctune.search.options (defaults and bounds said there), as the API's JSON gives them."""
    fields = {"traces": (list[TraceId], Field(min_length=1, max_length=64)),
              "name": (str | None, Field(None, description="letters, digits, '_', '.', '-'"))}
    for k in _options.USER:
        d = _options.default(k)
        if k in _options.NUMBERS:
            kind, lo, hi, text = _options.NUMBERS[k]
            # strict: JSON's true is no number (pydantic would read it as 1), "5" no integer
            strict = Annotated[kind, Strict()]
            fields[k] = (strict if d is not None else strict | None,
                         Field(d, ge=lo, le=hi, allow_inf_nan=False, description=text))
        elif k == "allocators":
            fields[k] = (list[Annotated[str, Field(max_length=64)]],
                         Field(list(d), min_length=1, max_length=16, description=(
                             "the allocators searched, each with its knobs: hc, "
                             f"{', '.join(_xknobs.names())}; [\"{INSTALLED}\"] (the default): "
                             "HC and every one installed on the worker's machine; [\"hc\"]: HC "
                             "alone")))
        elif k == "memory_measure":
            fields[k] = (str, Field(d, max_length=16, description="what mem minimises: "
                                    + " or ".join(_obj.MEMORY_MEASURES)))
        elif isinstance(d, tuple):
            fields[k] = (list[str], Field(list(d), max_length=16))
        else:
            fields[k] = (str, d)
    # a field it does not know is refused ({"trial": 5} is not "trials"), not ignored
    return create_model("StudyRequest", __config__=ConfigDict(extra="forbid"), **fields)


INSTALLED = _options.INSTALLED


def check_allocators(names: list[str]) -> list[str]:
    """The allocator names of a study asked for, checked (one line naming the bad one); the
    worker leaves out one its machine lacks (hctune.search.study.check_allocators) and
    expands "installed" there (hctune.jobs.runner.options_of)."""
    known = ["hc", *_xknobs.names()]
    out = []
    for n in names:
        if n == INSTALLED and len(names) > 1:
            raise HTTPException(422, f"allocators: {INSTALLED!r} stands alone (HC and every "
                                     "allocator installed)")
        if n != INSTALLED and n not in known:
            raise HTTPException(422, f"allocators: unknown allocator {n[:64]!r}; use "
                                     f"{', '.join(known)} or {INSTALLED}")
        if n not in out:
            out.append(n)
    return out


StudyRequest = _request_model()


def create_study(svc: Service, req: StudyRequest) -> dict:
    try:
        _obj.check_choice(req.objective, req.metric)
    except HctuneError as e:
        raise HTTPException(422, str(e)) from None
    if req.name is not None and not _NAME.match(req.name):
        raise HTTPException(422, "name: letters, digits, '_', '.', '-' (at most 64)")
    name = req.name or f"web-{req.objective}-{secrets.token_hex(4)}"
    req.allocators = check_allocators(req.allocators)
    if req.memory_measure not in _obj.MEMORY_MEASURES:
        raise HTTPException(422, f"memory_measure: {' or '.join(_obj.MEMORY_MEASURES)}, not "
                                 f"{req.memory_measure!r}")
    try:
        opts = _options.from_json(req.model_dump(include=set(_options.USER)))
    except HctuneError as e:
        raise HTTPException(422, str(e)) from None
    with svc.db() as db:
        for tid in req.traces:
            row = db.trace(tid)
            if row is None:
                raise HTTPException(404, f"no trace #{tid}")
            if not store.available(db, row):
                raise HTTPException(409, f"trace #{tid}'s file {Path(row['path']).name} "
                                         "is gone")
            if req.validate_runs and db.invocation(row) is None:
                raise HTTPException(422, f"validate_runs: trace #{tid} carries no command to "
                                         "run (uploaded or imported); validation needs "
                                         "traces profiled with `hctune profile`")
        if jobs.job(db, name) is not None or db.study(name) is not None:
            raise HTTPException(409, f"a study named {name!r} exists")
        try:
            jobs.enqueue(db, name, sorted(set(req.traces)), _options.to_json(opts))
        except HctuneError as e:   # queued by another request between the check and here
            raise HTTPException(409, f"a study named {name!r} exists") from e
        return study_brief(jobs.job(db, name), svc.fleet())


def validation(svc: Service, q) -> dict | None:
    """The study's latest validation (real runs, hctune.validate): its state, the number of
    runs stored so far, and once done the verdict, the winner and every candidate's medians
    and ratios (with intervals) beside the replay's prediction; or its one-line error."""
    with svc.db() as db:
        v = db.latest_validation(q["study"], done=False)
        if v is None:
            return None
        stored = len(db.real_runs(v["id"]))
    s = json.loads(v["summary_json"]) if v["summary_json"] else {}
    out = {"id": v["id"], "status": v["status"], "runs": v["runs"], "stored_runs": stored,
           "host": v["host"], "created": v["created"], "finished": v["finished"],
           "error": s.get("error")}
    if v["status"] == "failed" and out["error"] is None:
        out["error"] = "the validation failed"
    for k in ("verdict", "winner", "significant", "measure", "candidates", "notes",
              "output_check", "interval"):
        out[k] = s.get(k)
    return out


FINISHED = ("done", "failed", "cancelled")   # a study in these changes no more


def final_key(q, snap=None):
    """What names a finished study's unchanging state (a CLI study's `done` can grow when
    `hctune search` runs it again: its trial count is part of it); None while it runs."""
    if q["state"] not in FINISHED:
        return None
    return (q["study"], q["state"], q["created"], q["finished"],
            None if snap is None else len(snap.trials))


def comparison(svc: Service, q, snap=None) -> list[dict] | None:
    """The other allocators measured on the study's traces, from hctune.report.collect: made
    once for a finished study (counted: svc.counters["report"])."""
    def make():
        try:
            data = _report.collect(svc.cfg.db_path, q["study"], first_screen=False)
        except HctuneError:
            return None
        return [{"trace": t["id"], "allocators": t["allocators"]} for t in data["traces"]]
    key = final_key(q, snap)
    return make() if key is None else svc.once("report", key, make)


# the answer's environment in the other forms it is pasted in (hctune.serve.emit makes them
# from the variables of the same hctune.env): a systemd drop-in, a Dockerfile's ENV lines,
# one shell line
ENV_FORMS = ("allocator.conf", "Dockerfile.env", "env.line")


def answer(svc: Service, q, snap=None) -> dict | None:
    """A finished study's one answer, as `hctune emit --env` chooses it (hctune.emit.choose
    with any_allocator: the real runs' recommendation once validated, which may be glibc or
    another allocator as it comes, else the replay's best) and worded as `hctune best` words
    it; with the files that apply it. None while the study runs (the best so far is its
    summary). Made once per finished state (and validation)."""
    key = final_key(q, snap)
    if key is None:
        return None
    name = q["study"]
    with svc.db() as db:
        v = db.latest_validation(name, done=False)
    key = (*key, None if v is None else (v["id"], v["status"]))

    def make():
        try:
            alloc, setting, prov = _emit.choose(svc.cfg.db_path, name, None, None, (),
                                                paths=False, any_allocator=True)
        except HctuneError as e:
            return {"allocator": None, "said": str(e).splitlines()[0], "files": []}
        except Exception as e:   # (a stored row no version wrote) never breaks the study's JSON
            return {"allocator": None, "files": [],
                    "said": f"the answer could not be read ({type(e).__name__})"}
        base = f"/api/studies/{quote(name, safe='')}/emit/"
        decided = _decided(svc, name)
        if allocators.family(alloc).compiled:
            changed = changed_from_generic("hc", _knobs.key(setting))
            said = (f"HC (Hasan & Chang 2006), changed from generic (Table 6): "
                    f"{'none' if changed == 'generic' else changed.replace(',', ', ')}")
            files = ["malloc.c", "libhcmalloc.so", "malloc.mk", "hcmalloc.cmake", "hctune.env",
                     *ENV_FORMS]
        else:
            changed = None
            said = f"allocator: {_xknobs.describe(alloc, setting)}"
            files = ["hctune.env", *ENV_FORMS]
        return {"allocator": alloc, "said": said, "changed_from_generic": changed,
                "objective": prov.get("objective"),
                "chosen_by": prov.get("chosen by") or prov.get("validated")
                or "the replay (not validated: hctune validate)",
                "files": [{"name": f, "url": base + f} for f in files], **decided}
    return svc.once("answer", key, make)


def _decided(svc: Service, name: str) -> dict:
    """The answer as hctune.search.answer decides it for best, emit and report: its label, and
    its trial in its own study (a winner of another study is that study's trial)."""
    from hctune.search import answer as _answer  # deferred: Optuna, for a finished study only
    try:
        with svc.db() as db:
            a = _answer.decide(db, name)
    except HctuneError:
        return {}
    c = a.answer
    return {"label": c.label(), "trial": c.number,
            "study": c.origin["study"] if c.origin else name}


def study_full(svc: Service, q, with_trials: bool = True) -> Response:
    """The study, its summary, comparison and (with_trials) trials as JSON; the trials go in
    as the cache's bytes, not decoded and encoded again. A finished study's answer is made
    once (again when a validation comes) and its bytes served from then on."""
    snap = svc.trials.get(q["study"], q["state"])
    key = final_key(q, snap)
    if key is None:
        return Response(_study_body(svc, q, snap, with_trials), media_type="application/json")
    with svc.db() as db:
        v = db.latest_validation(q["study"], done=False)
    key = (*key, None if v is None else (v["id"], v["status"]), with_trials)
    return Response(svc.once("study.json", key, lambda: _study_body(svc, q, snap, with_trials)),
                    media_type="application/json")


def _study_body(svc: Service, q, snap, with_trials: bool) -> bytes:
    out = study_brief(q, svc.fleet())
    out["allocators_searched"] = svc.read(lambda db: allocators_searched(db, q["study"]))
    objective = out["options"].get("objective", "mem")
    out["summary"] = None if snap is None else snap.summary(objective)
    out["comparison"] = comparison(svc, q, snap) if q["state"] == "done" else None
    out["validation"] = validation(svc, q)
    out["answer"] = answer(svc, q, snap)
    body = json.dumps(out, separators=(",", ":")).encode()
    if with_trials:
        body = body[:-1] + b',"trials":' + (b"[]" if snap is None else snap.blob) + b"}"
    return body


def not_modified(request: Request, etag: str) -> bool:
    given = request.headers.get("if-none-match")
    if not given:
        return False
    tags = {t.strip().removeprefix("W/") for t in given.split(",")}
    return "*" in tags or etag in tags


@router.get("/api/studies")
def api_studies(svc: Service = Depends(service)):
    with svc.db() as db:
        return [study_brief(q, svc.fleet()) for q in svc.study_rows(db)]


@router.post("/api/studies", status_code=201, dependencies=[Depends(need_token)],
             responses={404: {"description": "no such trace"},
                        409: {"description": "a study of that name exists, or a trace's file "
                                             "is gone"}})
def api_create(req: StudyRequest, svc: Service = Depends(service)):
    return create_study(svc, req)


@router.get("/api/studies/{name}")
def api_study(name: str, trials: bool = Query(True, description="include the trials list "
                                              "(a polling client reads /trials?since=N)"),
              svc: Service = Depends(service)):
    return study_full(svc, svc.queue_row(name), trials)


async def snapshot(svc: Service, name: str, state: str):
    """trials.get() without leaving the event loop unless a read of the storage is due
    (at most once a second per study): the hot path of every polling client."""
    return svc.trials.peek(name, state) or await run_in_threadpool(svc.trials.get, name, state)


@router.get("/api/studies/{name}/trials")
async def api_trials(request: Request, name: str,
                     since: int = Query(0, ge=0, le=MAX_ID, description="only the trials numbered this or "
                                        "more: a finished trial never changes, so a polling "
                                        "client asks from its first unfinished one")):
    """The study's trials in number order, read at most a second ago. The ETag changes
    with them: with `If-None-Match` an unchanged list is a 304 with no body."""
    svc = service(request)
    q = svc.queue_row(name)
    snap = await snapshot(svc, name, q["state"])
    body, etag = (b"[]", '"empty"') if snap is None else snap.since(since)
    headers = {"ETag": etag, "Cache-Control": "no-cache"}
    if not_modified(request, etag):
        return Response(status_code=304, headers=headers)
    return Response(body, media_type="application/json", headers=headers)


CSV_COLUMNS = ("number", "state", "allocator", "mem_ratio", "perf_ratio", "feasible",
               "duration_s", "seed", "worker", "changed", "setting", "error", "retry_of")


@router.get("/api/studies/{name}/trials.csv")
async def api_trials_csv(request: Request, name: str):
    """The study's trials as CSV (one row each, the columns of the trial table; `changed` is
    what the setting changes from HC's generic one), for a spreadsheet."""
    svc = service(request)
    q = svc.queue_row(name)
    snap = await snapshot(svc, name, q["state"])
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    for r in ([] if snap is None else snap.rows()):
        w.writerow([_cell(r.get(c)) for c in CSV_COLUMNS])
    return Response(out.getvalue(), media_type="text/csv", headers={
        "Content-Disposition": f'attachment; filename="{quote(name, safe="")}-trials.csv"'})


def _cell(v):
    """A CSV cell a spreadsheet shows as text: one starting with = + - @ would be a formula."""
    if isinstance(v, str) and v[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + v
    return "" if v is None else v


def trial_detail(svc: Service, name: str, number: int) -> dict:
    """One trial whole: its row, its whole setting, its measurements per trace, the real runs
    of it (validation candidates that are this trial)."""
    q = svc.queue_row(name)
    snap = svc.trials.get(name, q["state"])
    t = None if snap is None else next((x for x in snap.trials if x.number == number), None)
    if t is None:
        raise HTTPException(404, f"study {name!r} has no trial {number}")
    row = dict(next(r for r in snap.rows() if r["number"] == number))
    try:
        whole = _study.trial_setting(t)
    except (HctuneError, ValueError, TypeError, KeyError):
        whole = None
    per_trace = t.user_attrs.get("per_trace")
    v = validation(svc, q)
    runs = [c for c in (v or {}).get("candidates") or []
            if isinstance(c, dict) and c.get("trial") == number]
    return {**row, "study": name, "whole_setting": _finite_json(whole),
            "per_trace": _finite_json(per_trace) if isinstance(per_trace, list) else [],
            "started": t.datetime_start.isoformat() if t.datetime_start else None,
            "completed": t.datetime_complete.isoformat() if t.datetime_complete else None,
            "params": _finite_json({k: v for k, v in t.params.items()}),
            "validation_runs": runs}


def _finite_json(v):
    return _finite(json.loads(json.dumps(v, default=str)))


@router.get("/api/studies/{name}/trials/{number}")
def api_trial(name: str, number: int = PathParam(ge=0, le=MAX_ID),
              svc: Service = Depends(service)):
    """One trial: its row of the table, its whole setting, its measurements per trace, its
    start and end, and the real runs of it when the study was validated."""
    return trial_detail(svc, name, number)


@router.post("/api/studies/{name}/cancel", dependencies=[Depends(need_token)],
             responses={409: {"description": "the study is not queued or running"}})
def api_cancel(name: str, svc: Service = Depends(service)):
    """Stop the study: a queued one never starts; the workers on a running one stop after
    their current trial (its finished trials stay, and its downloads work)."""
    svc.queue_row(name)
    with svc.db() as db:
        if not jobs.cancel(db, name):
            q = jobs.job(db, name)
            raise HTTPException(409, f"study {name!r} is {q['state'] if q else 'not queued'}; "
                                     "only a queued or running study can be cancelled")
    return {"name": name, "state": "cancelled",
            "said": "a queued study never starts; workers stop after their current trial"}


@router.delete("/api/studies/{name}", dependencies=[Depends(need_token)],
               responses={409: {"description": "a worker is on the study (cancel it first)"}})
def api_delete(name: str, svc: Service = Depends(service)):
    """Delete the study: its queue entry, its trials (in the Optuna storage), its row of
    studies, its validations and real runs. Its traces and the allocators' measurements on
    them stay. A study a worker is on: 409 (cancel it first)."""
    svc.queue_row(name)
    import optuna  # deferred: Optuna (as hctune.serve.trials)
    with svc.db() as db:
        try:
            deleted = jobs.delete(db, name)
        except HctuneError as e:
            raise HTTPException(409, str(e)) from None
    try:
        st = optuna.load_study(study_name=name, storage=svc.cfg.optuna_storage())
        deleted["trials"] = len(st.get_trials(deepcopy=False))
        optuna.delete_study(study_name=name, storage=svc.cfg.optuna_storage())
    except KeyError:
        deleted["trials"] = 0
    svc.trials.forget(name)
    views.forget(name)
    return {"name": name, "deleted": deleted,
            "kept": "its traces, and the allocators' measurements on them"}
