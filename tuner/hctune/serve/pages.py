"""The HTML pages of `hctune serve` (the templates serve_*.html.j2) and their forms, which go
through the same functions as the JSON API (hctune.serve.traces, hctune.serve.studies)."""

from __future__ import annotations

import hashlib
import json
from typing import Literal

from fastapi import APIRouter, Depends, Form, HTTPException, Path, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from pydantic import ValidationError

from hctune import allocator_knobs as _xknobs
from hctune import templating
from hctune.search import objective as _obj
from hctune.search import options as _options
from hctune.serve.auth import need_token
from hctune.serve.state import Service, allocators_searched, service, study_brief
from hctune.serve.studies import MAX_ID, StudyRequest, create_study, not_modified, trial_detail
from hctune.serve.traces import upload
from hctune.trace import report as trace_report
from hctune.trace.stats import stats as trace_stats

router = APIRouter(include_in_schema=False)


@router.get("/")
def index():
    return RedirectResponse("/studies", status_code=303)


@router.get("/docs", response_class=HTMLResponse)
def api_docs(request: Request, svc: Service = Depends(service)):
    """The API as a page made from the OpenAPI document, with nothing from the network."""
    spec = request.app.openapi()
    paths = [(p, [(m, op) for m, op in ops.items() if isinstance(op, dict)])
             for p, ops in sorted(spec.get("paths", {}).items())]
    schemas = sorted(spec.get("components", {}).get("schemas", {}).items())
    return svc.page("serve_docs.html.j2", request, forms=False, paths=paths, schemas=schemas,
                    secured=svc.cfg.token is not None, type_of=_type_of)


def _type_of(s: dict) -> str:
    """A JSON schema's type as a reader says it: integer, string | null, array of integer."""
    if "anyOf" in s:
        return " | ".join(_type_of(x) for x in s["anyOf"])
    if "$ref" in s:
        return s["$ref"].rsplit("/", 1)[-1]
    if s.get("type") == "array":
        return f"array of {_type_of(s.get('items', {}))}"
    return str(s.get("type", "any"))


@router.get("/traces", response_class=HTMLResponse)
def traces_page(request: Request, svc: Service = Depends(service)):
    return svc.page("serve_traces.html.j2", request, traces=svc.list_traces())


@router.post("/traces", dependencies=[Depends(need_token)])
async def traces_upload(request: Request):
    t, _ = await upload(service(request), request)
    return RedirectResponse(f"/traces/{t['id']}", status_code=303)


@router.get("/traces/{trace_id}", response_class=HTMLResponse)
def trace_page(trace_id: int = Path(ge=1, le=MAX_ID), svc: Service = Depends(service)):
    with svc.db() as db:
        row = db.trace(trace_id)
    if row is None:
        raise HTTPException(404, f"no trace #{trace_id}")
    if row["stats_json"]:
        st = json.loads(row["stats_json"])
    else:
        st = trace_stats(row["path"])
    return HTMLResponse(trace_report.html(st, f"trace #{trace_id}: {row['command'] or ''}"))


@router.get("/studies", response_class=HTMLResponse)
def studies_page(request: Request, part: Literal["table"] | None = None,
                 svc: Service = Depends(service)):
    """The studies and the form to start one; ?part=table: the list alone (what the page's
    JavaScript fetches to refresh it)."""
    if part == "table":
        st = _summaries(svc)
        body = templating.render("serve_studies_table.html.j2", studies=st[0],
                                 summaries=st[1]).encode()
        etag = '"' + hashlib.blake2b(body, digest_size=12).hexdigest() + '"'
        headers = {"ETag": etag, "Cache-Control": "no-cache"}
        if not_modified(request, etag):
            return Response(status_code=304, headers=headers)
        return HTMLResponse(body, headers=headers)
    return _studies_page(request, svc)


# A finished study's summary never changes: kept, so that the list's refresh (every 5 s per
# open tab) reads only the studies still running, whatever the number of finished ones (the
# trials cache keeps 32 studies). The key holds the study's creation and end.
_FINISHED = ("done", "failed", "cancelled")
_final: dict[tuple, dict | None] = {}


def _summaries(svc: Service) -> tuple[list[dict], dict]:
    """(the studies, newest first; {name: its summary, or None before its first trial})."""
    with svc.db() as db:
        rows = [study_brief(q, svc.fleet()) for q in svc.study_rows(db)]
    st = {}
    for r in rows:
        if r["state"] == "queued":
            continue
        objective = r["options"].get("objective", "mem")
        key = (svc.cfg.storage, r["name"], r["state"], r["created"], r["finished"], objective)
        if r["state"] in _FINISHED and key in _final:
            st[r["name"]] = _final[key]
            continue
        s = svc.trials.get(r["name"], r["state"])
        st[r["name"]] = None if s is None else s.summary(objective)
        if r["state"] in _FINISHED and r["finished"]:
            if len(_final) >= 4096:
                _final.clear()
            _final[key] = st[r["name"]]
    return rows, st


def _studies_page(request: Request, svc: Service, form: dict | None = None,
                  form_error: str | None = None, status_code: int = 200) -> HTMLResponse:
    """The studies and the form to start one; after a refused form, the form again with its
    input kept and the error beside it."""
    rows, st = _summaries(svc)
    return svc.page("serve_studies.html.j2", request, status_code=status_code, studies=rows,
                    summaries=st, traces=svc.list_traces(), objectives=_obj.OBJECTIVES,
                    metrics=_obj.METRICS, defaults=_options.Options(), bounds=_options.NUMBERS,
                    allocators=["hc", *_xknobs.names()], installed=_options.INSTALLED,
                    memory_measures=_obj.MEMORY_MEASURES,
                    form=form, form_error=form_error)


_FORM_NUMBERS = ("trials", "timeout", "max_memory_overhead", "max_slowdown", "validate_runs",
                 "validate_top")


def _form_allocators(chosen_from: str, ticked: list[str]) -> list[str]:
    """The form's allocators: "installed" chosen (the default) is HC and every one installed
    on the worker's machine; "ticked": the boxes ticked (at least one); a form without the
    choice (an older page, a script): the boxes ticked, or the default when none is."""
    if chosen_from == _options.INSTALLED:
        return [_options.INSTALLED]
    if chosen_from and not ticked:
        raise HTTPException(422, "allocators: tick at least one, or choose "
                                 f"{_options.INSTALLED!r}")
    return ticked or list(_options.DEFAULT_ALLOCATORS)


@router.post("/studies", dependencies=[Depends(need_token)])
def studies_create(request: Request, traces: list[str] = Form([]),
                   objective: str = Form(_options.default("objective")),
                   metric: str = Form(_options.default("metric")), trials: str = Form(""),
                   timeout: str = Form(""), max_memory_overhead: str = Form(""),
                   max_slowdown: str = Form(""), validate_runs: str = Form(""),
                   validate_top: str = Form(""), allocators: list[str] = Form([]),
                   allocators_from: str = Form(""),
                   memory_measure: str = Form(_options.default("memory_measure")),
                   name: str = Form(""), svc: Service = Depends(service)):
    form = {"traces": traces, "objective": objective, "metric": metric, "trials": trials,
            "timeout": timeout, "max_memory_overhead": max_memory_overhead,
            "max_slowdown": max_slowdown, "validate_runs": validate_runs,
            "validate_top": validate_top, "allocators": allocators,
            "allocators_from": allocators_from, "memory_measure": memory_measure,
            "name": name}
    try:
        given = {}
        for k in _FORM_NUMBERS:
            text = form[k].strip()
            if not text:
                continue
            try:
                given[k] = int(text) if _options.NUMBERS[k][0] is int else float(text)
            except ValueError:
                raise HTTPException(422, f"{k}: not a number: {text!r}") from None
        try:
            req = StudyRequest(traces=[int(t) for t in traces if t.strip().isdigit()] or
                               ([-1] if traces else []),
                               objective=objective, metric=metric,
                               allocators=_form_allocators(allocators_from, allocators),
                               memory_measure=memory_measure, name=name.strip() or None,
                               **given)
        except ValidationError as e:
            first = e.errors()[0]
            where = ".".join(map(str, first["loc"]))
            raise HTTPException(422, f"{where}: {first['msg']}") from None
        s = create_study(svc, req)
    except HTTPException as e:
        if e.status_code >= 500:
            raise
        return _studies_page(request, svc, form=form, form_error=str(e.detail),
                             status_code=e.status_code)
    return RedirectResponse(f"/studies/{s['name']}", status_code=303)


@router.get("/studies/{name}/trials/{number}", response_class=HTMLResponse)
def trial_page(request: Request, name: str, number: int = Path(ge=0, le=MAX_ID),
               svc: Service = Depends(service)):
    """One trial whole (GET /api/studies/NAME/trials/N as a page)."""
    return svc.page("serve_trial.html.j2", request, forms=False,
                    t=trial_detail(svc, name, number))


@router.get("/studies/{name}", response_class=HTMLResponse)
async def study_page(request: Request, name: str):
    # (async: no thread for a page that is read from memory; its JavaScript fills it in)
    svc = service(request)
    study = study_brief(svc.queue_row(name), svc.fleet())
    # the allocators as asked ("installed") and as the worker expanded them on its machine
    study["allocators_searched"] = svc.read(lambda db: allocators_searched(db, name))
    key = (json.dumps(study, sort_keys=True), svc.authorised(request),
           svc.session_cookie(request) is not None)
    body = svc.rendered.get(key)
    if body is None:
        if len(svc.rendered) >= 256:
            svc.rendered.clear()
        body = svc.rendered[key] = svc.page("serve_study.html.j2", request, forms=False,
                                                   study=study).body
    return HTMLResponse(body)
