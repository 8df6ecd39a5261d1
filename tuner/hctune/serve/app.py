"""The web app and JSON API of `hctune serve` (FastAPI). It reads the results database and the
Optuna storage, stores uploaded traces under its own directory, and queues studies in hc_queue;
it never runs a search in a request (`hctune worker` does).

User mistakes are 4xx with {"error": "..."}; with a token, every write and download needs it
(`Authorization: Bearer T`, or the `hctune_token` cookie the /login form sets)."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import secrets
import tempfile
import threading
from pathlib import Path

import optuna
from fastapi import Depends, FastAPI, File, Form, HTTPException, Query, Request, UploadFile
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import (FileResponse, HTMLResponse, JSONResponse, RedirectResponse,
                               Response)
from pydantic import BaseModel, Field, ValidationError

from hctune import __version__, templating
from hctune import validate as _validate
from hctune.db import Database, database_url
from hctune.errors import HctuneError
from hctune.search import objective as _obj
from hctune.search import study as _study
from hctune.search.storage import open_storage
from hctune.serve.trials import DEFAULT_TTL, TrialsCache
from hctune.trace import store

DEFAULT_MAX_UPLOAD = 256 << 20
FORMATS = ("hctune", "text", "mtrace")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


class Config:
    def __init__(self, db_path, storage: str, data_dir, token: str | None = None,
                 max_upload: int = DEFAULT_MAX_UPLOAD, trials_ttl: float = DEFAULT_TTL):
        self.db_path = str(db_path)
        self.storage = storage
        self.data_dir = Path(data_dir).resolve()
        self.token = token
        self.max_upload = max_upload
        self.trials_ttl = trials_ttl
        (self.data_dir / "traces").mkdir(parents=True, exist_ok=True)
        (self.data_dir / "tmp").mkdir(parents=True, exist_ok=True)
        (self.data_dir / "emit").mkdir(parents=True, exist_ok=True)
        self._storage = None
        self._lock = threading.Lock()

    def optuna_storage(self):
        with self._lock:
            if self._storage is None:
                self._storage = open_storage(self.storage)
            return self._storage

    # `serve --http-workers N`: uvicorn's processes build their app from the environment
    def to_env(self) -> str:
        return json.dumps({"db_path": self.db_path, "storage": self.storage,
                           "data_dir": str(self.data_dir), "token": self.token,
                           "max_upload": self.max_upload, "trials_ttl": self.trials_ttl})

    @classmethod
    def from_env(cls) -> Config:
        return cls(**json.loads(os.environ[ENV_CONFIG]))


ENV_CONFIG = "HCTUNE_SERVE_CONFIG"


def app_from_env() -> FastAPI:
    """The app of one of `serve --http-workers N`'s processes."""
    return create_app(Config.from_env())


class StudyRequest(BaseModel):
    traces: list[int] = Field(min_length=1, max_length=64)
    objective: str = "mem"
    metric: str = "time"
    trials: int = Field(20, ge=1, le=10000)
    timeout: float | None = Field(None, gt=0)
    max_memory_overhead: float | None = Field(None, ge=0)
    max_slowdown: float | None = Field(None, ge=0)
    repeat: int = Field(1, ge=1, le=20)
    seed: int | None = None
    name: str | None = None
    compare_rounds: int = Field(3, ge=0, le=20, description="rounds of measuring the other "
                                "allocators once the search is done (0: none)")
    validate_runs: int = Field(0, ge=0, le=100, description=(
        "once the search is done, real runs of the profiled program per candidate on the "
        f"worker's machine (hctune validate); 0: none, else at least {_validate.MIN_RUNS}. "
        "Every trace must carry its command (profiled with `hctune profile`)"))
    validate_top: int = Field(_validate.DEFAULT_TOP, ge=1, le=10, description=(
        "how many of the study's best distinct settings the validation runs"))


def _error(status: int, msg: str) -> JSONResponse:
    return JSONResponse({"error": msg}, status_code=status)


def create_app(cfg: Config) -> FastAPI:
    app = FastAPI(title="hctune", version=__version__,
                  description="Profile traces, tune the HC allocator, download a tuned malloc.c")
    app.state.cfg = cfg

    @app.exception_handler(HctuneError)
    async def _hctune_error(request, exc):
        return _error(400, str(exc))

    @app.exception_handler(HTTPException)
    async def _http_error(request, exc):
        return _error(exc.status_code, str(exc.detail))

    @app.exception_handler(RequestValidationError)
    async def _invalid(request, exc):
        errs = exc.errors()
        first = errs[0] if errs else {}
        where = ".".join(str(x) for x in first.get("loc", ()) if x != "body")
        return _error(422, f"{where}: {first.get('msg', 'invalid request')}")

    @app.exception_handler(Exception)
    async def _internal(request, exc):  # never a traceback to the client
        return _error(500, f"internal error: {type(exc).__name__}")

    # ---- auth ----

    def authorised(request: Request) -> bool:
        if cfg.token is None:
            return True
        given = None
        auth = request.headers.get("authorization", "")
        if auth.lower().startswith("bearer "):
            given = auth[7:].strip()
        given = given or request.cookies.get("hctune_token")
        return given is not None and hmac.compare_digest(given.encode(), cfg.token.encode())

    def need_token(request: Request):
        if not authorised(request):
            raise HTTPException(401 if "authorization" not in request.headers
                                and "hctune_token" not in request.cookies else 403,
                                "a valid token is required (Authorization: Bearer TOKEN)")

    def page(name: str, request: Request, **ctx) -> HTMLResponse:
        return HTMLResponse(templating.render(name, version=__version__,
                                              need_login=not authorised(request), **ctx))

    @app.get("/login", response_class=HTMLResponse, include_in_schema=False)
    def login_form(request: Request):
        return page("serve_login.html.j2", request, failed=False)

    @app.post("/login", include_in_schema=False)
    def login(request: Request, token: str = Form("")):
        if cfg.token is None or not hmac.compare_digest(token.encode(), cfg.token.encode()):
            return HTMLResponse(templating.render("serve_login.html.j2", version=__version__,
                                                  need_login=True, failed=True), status_code=403)
        r = RedirectResponse("/", status_code=303)
        r.set_cookie("hctune_token", token, httponly=True, samesite="strict")
        return r

    # ---- traces ----

    def trace_json(row) -> dict:
        return {"id": row["id"], "program": row["command"], "events": row["events"],
                "size_bytes": row["size_bytes"], "tracer": row["tracer"],
                "created": row["created"], "sha256": row["sha256"],
                # profiled with `hctune profile`: its command can run again (validation)
                "runnable": Database.invocation(row) is not None}

    def list_traces() -> list[dict]:
        with Database(cfg.db_path) as db:
            return [trace_json(r) for r in reversed(db.traces())]

    def store_upload(up: UploadFile, fmt: str, request: Request) -> dict:
        if fmt not in FORMATS:
            raise HTTPException(400, f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
        length = request.headers.get("content-length")
        if length and length.isdigit() and int(length) > cfg.max_upload + 65536:
            raise HTTPException(413, f"upload larger than the limit ({cfg.max_upload} bytes)")
        tmpdir = Path(tempfile.mkdtemp(dir=cfg.data_dir / "tmp"))
        try:
            raw = tmpdir / "upload"   # the client's file name is never used
            n = 0
            with open(raw, "wb") as f:
                while chunk := up.file.read(1 << 20):
                    n += len(chunk)
                    if n > cfg.max_upload:
                        raise HTTPException(413, f"upload larger than the limit "
                                                 f"({cfg.max_upload} bytes)")
                    f.write(chunk)
            if n == 0:
                raise HTTPException(400, "the upload is empty")
            try:
                if fmt == "hctune":
                    trace = raw
                else:
                    from hctune.trace.importers import import_trace
                    trace = import_trace(raw, fmt, tmpdir / "imported.trace")
                from hctune.trace.stats import stats as trace_stats
                st = trace_stats(trace)   # reads every event: magic, version, well-formed
            except HctuneError as e:   # the server's paths are none of the client's business
                msg = str(e).replace(str(tmpdir / "imported.trace"), "the imported trace")
                raise HTTPException(400, msg.replace(str(raw), "the upload")
                                    .replace(str(tmpdir), "")) from None
            if not st.get("events"):
                raise HTTPException(400, "the trace has no allocation events")
            digest = hashlib.sha256(trace.read_bytes()).hexdigest()
            final = cfg.data_dir / "traces" / f"{digest}.trace"
            os.replace(trace, final)
            from hctune.trace.register import register
            tid, _ = register(cfg.db_path, final, "upload" if fmt == "hctune" else f"import:{fmt}",
                              st)
        finally:
            for p in tmpdir.iterdir():
                p.unlink()
            tmpdir.rmdir()
        with Database(cfg.db_path) as db:
            return trace_json(db.trace(tid))

    @app.get("/api/traces", tags=["traces"])
    def api_traces():
        return list_traces()

    @app.post("/api/traces", tags=["traces"], status_code=201, dependencies=[Depends(need_token)])
    def api_upload(request: Request, file: UploadFile = File(...), format: str = Form("hctune")):
        return store_upload(file, format, request)

    @app.get("/api/traces/{trace_id}", tags=["traces"])
    def api_trace(trace_id: int):
        with Database(cfg.db_path) as db:
            row = db.trace(trace_id)
        if row is None:
            raise HTTPException(404, f"no trace #{trace_id}")
        out = trace_json(row)
        out["stats"] = json.loads(row["stats_json"]) if row["stats_json"] else None
        return out

    @app.get("/", include_in_schema=False)
    def index():
        return RedirectResponse("/studies", status_code=303)

    @app.get("/traces", response_class=HTMLResponse, include_in_schema=False)
    def traces_page(request: Request):
        return page("serve_traces.html.j2", request, traces=list_traces())

    @app.post("/traces", include_in_schema=False, dependencies=[Depends(need_token)])
    def traces_upload(request: Request, file: UploadFile = File(...),
                      format: str = Form("hctune")):
        t = store_upload(file, format, request)
        return RedirectResponse(f"/traces/{t['id']}", status_code=303)

    @app.get("/traces/{trace_id}", response_class=HTMLResponse, include_in_schema=False)
    def trace_page(trace_id: int):
        from hctune.trace import report as trace_report
        with Database(cfg.db_path) as db:
            row = db.trace(trace_id)
        if row is None:
            raise HTTPException(404, f"no trace #{trace_id}")
        if row["stats_json"]:
            st = json.loads(row["stats_json"])
        else:
            from hctune.trace.stats import stats as trace_stats
            st = trace_stats(row["path"])
        return HTMLResponse(trace_report.html(st, f"trace #{trace_id}: {row['command'] or ''}"))

    # ---- studies ----

    def load_optuna(name: str):
        try:
            return optuna.load_study(study_name=name, storage=cfg.optuna_storage())
        except KeyError:
            return None

    def study_brief(q) -> dict:
        out = {"name": q["study"], "state": q["state"], "error": q["error"],
               "traces": json.loads(q["trace_ids"]), "options": json.loads(q["options_json"]),
               "created": q["created"], "started": q["started"], "finished": q["finished"]}
        return out

    # A study's trials as last read, at most cfg.trials_ttl old, and never older than the study's
    # state in hc_queue (hctune.serve.trials).
    trials = TrialsCache(cfg.optuna_storage, cfg.trials_ttl)

    def study_full(q, with_trials: bool = True) -> Response:
        """The study, its summary, comparison and (with_trials) trials as JSON; the trials go in
        as the cache's bytes, not decoded and encoded again."""
        out = study_brief(q)
        snap = trials.get(q["study"], q["state"])
        out["summary"] = None if snap is None else snap.summary(out["options"]["objective"])
        out["comparison"] = comparison(q) if q["state"] == "done" else None
        out["validation"] = validation(q)
        body = json.dumps(out, separators=(",", ":")).encode()
        if with_trials:
            body = body[:-1] + b',"trials":' + (b"[]" if snap is None else snap.blob) + b"}"
        return Response(body, media_type="application/json")

    def validation(q) -> dict | None:
        """The study's latest validation (real runs, hctune.validate): its state, the number of
        runs stored so far, and once done the verdict, the winner and every candidate's medians
        and ratios (with intervals) beside the replay's prediction; or its one-line error."""
        with Database(cfg.db_path) as db:
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

    def not_modified(request: Request, etag: str) -> bool:
        given = request.headers.get("if-none-match")
        if not given:
            return False
        tags = {t.strip().removeprefix("W/") for t in given.split(",")}
        return "*" in tags or etag in tags

    def comparison(q) -> list[dict] | None:
        from hctune import report as _report
        try:
            data = _report.collect(cfg.db_path, q["study"])
        except HctuneError:
            return None
        return [{"trace": t["id"], "allocators": t["allocators"]} for t in data["traces"]]

    local = threading.local()
    # SQLite: one connection per server thread, kept open (opening the file costs more than the
    # read); a server database: its pool's, as many threads would hold more than the pool has
    keep = database_url(cfg.db_path).startswith("sqlite")

    def queue_row(name: str):
        """The study's hc_queue row, read afresh (a change of state shows at once): every poll
        of a live page comes here."""
        if not keep:
            with Database(cfg.db_path) as db:
                q = db.queued(name)
        else:
            db = getattr(local, "db", None)
            if db is None:
                db = local.db = Database(cfg.db_path)
            q = db.queued(name)
        if q is None:
            raise HTTPException(404, f"no study named {name!r}")
        return q

    def create_study(req: StudyRequest) -> dict:
        try:
            _obj.check_choice(req.objective, req.metric)
        except HctuneError as e:
            raise HTTPException(422, str(e)) from None
        if req.name is not None and not _NAME.match(req.name):
            raise HTTPException(422, "name: letters, digits, '_', '.', '-' (at most 64)")
        name = req.name or f"web-{req.objective}-{secrets.token_hex(4)}"
        if 0 < req.validate_runs < _validate.MIN_RUNS:
            raise HTTPException(422, f"validate_runs: 0 (no validation) or at least "
                                     f"{_validate.MIN_RUNS} (intervals need several runs)")
        with Database(cfg.db_path) as db:
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
            if db.queued(name) is not None or db.study(name) is not None:
                raise HTTPException(409, f"a study named {name!r} exists")
            opts = req.model_dump(exclude={"traces", "name"})
            db.enqueue(name, sorted(set(req.traces)), opts)
            return study_brief(db.queued(name))

    @app.get("/api/studies", tags=["studies"])
    def api_studies():
        with Database(cfg.db_path) as db:
            return [study_brief(q) for q in db.queued()]

    @app.post("/api/studies", tags=["studies"], status_code=201,
              dependencies=[Depends(need_token)])
    def api_create(req: StudyRequest):
        return create_study(req)

    @app.get("/api/studies/{name}", tags=["studies"])
    def api_study(name: str, trials: bool = Query(True, description="include the trials list "
                                                  "(a polling client reads /trials?since=N)")):
        return study_full(queue_row(name), trials)

    async def snapshot(name: str, state: str):
        """trials.get() without leaving the event loop unless a read of the storage is due
        (at most once a second per study): the hot path of every polling client."""
        return trials.peek(name, state) or await run_in_threadpool(trials.get, name, state)

    @app.get("/api/studies/{name}/trials", tags=["studies"])
    async def api_trials(request: Request, name: str,
                   since: int = Query(0, ge=0, description="only the trials numbered this or "
                                      "more: a finished trial never changes, so a polling "
                                      "client asks from its first unfinished one")):
        """The study's trials in number order, read at most a second ago. The ETag changes
        with them: with `If-None-Match` an unchanged list is a 304 with no body."""
        q = queue_row(name)
        snap = await snapshot(name, q["state"])
        body, etag = (b"[]", '"empty"') if snap is None else snap.since(since)
        headers = {"ETag": etag, "Cache-Control": "no-cache"}
        if not_modified(request, etag):
            return Response(status_code=304, headers=headers)
        return Response(body, media_type="application/json", headers=headers)

    # ---- emit ----

    def setting_for(name: str, trial: int | None):
        """(setting, provenance) of the study's best (trial None) or of one finished trial."""
        from hctune import emit as _emit
        from hctune import knobs as _knobs
        queue_row(name)
        if trial is None:
            return _emit.choose_setting(cfg.db_path, name, None, None, ())
        st = load_optuna(name)
        frozen = None if st is None else next(
            (t for t in _study.finished(st) if t.number == trial), None)
        if frozen is None:
            raise HTTPException(404, f"study {name!r} has no finished trial {trial}")
        setting = _study.trial_setting(frozen)
        import datetime as _dt
        prov = {"trace": "see the study", "objective": f"study {name}, trial {trial}",
                "source": frozen.user_attrs.get("seed") or "found by the Optuna search",
                "measured": f"footprint {frozen.user_attrs['mem']:.3f}x glibc, perf "
                            f"{frozen.user_attrs['perf']:.3f}x glibc",
                "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                "hctune": __version__}
        return _knobs.complete(setting), prov

    def emit_dir(name: str, trial: int | None, want_so: bool) -> Path:
        from hctune import emit as _emit
        from hctune import render
        from hctune.files import write_atomic
        setting, prov = setting_for(name, trial)
        text = render.render_malloc(setting, prov)
        key = hashlib.sha256(text.encode()).hexdigest()[:16]
        d = cfg.data_dir / "emit" / key
        d.mkdir(parents=True, exist_ok=True)
        src = d / "malloc.c"
        if not src.exists():
            write_atomic(src, text)
        for fname, tpl in (("malloc.mk", "snippets/malloc.mk.j2"),
                           ("hcmalloc.cmake", "snippets/hcmalloc.cmake.j2")):
            if not (d / fname).exists():
                write_atomic(d / fname, templating.render(
                    tpl, source="malloc.c", mk_name="malloc.mk", cmake_name="hcmalloc.cmake",
                    so_name="libhcmalloc.so", so_stem="hcmalloc"))
        if want_so and not (d / "libhcmalloc.so").exists():
            _emit.compile_so(src, d / "libhcmalloc.so")
        return d

    _FILES = {"malloc.c": "text/x-c", "malloc.mk": "text/plain",
              "hcmalloc.cmake": "text/plain", "libhcmalloc.so": "application/octet-stream"}

    @app.get("/api/studies/{name}/emit/{file}", tags=["emit"],
             dependencies=[Depends(need_token)])
    def api_emit(name: str, file: str, trial: int | None = None):
        """The study's best setting (or `trial`'s) as malloc.c, its Make or CMake snippet, or
        the shared library built on this server's platform."""
        if file not in _FILES:
            raise HTTPException(404, f"no such file {file!r}; one of {', '.join(_FILES)}")
        d = emit_dir(name, trial, file == "libhcmalloc.so")
        return FileResponse(d / file, media_type=_FILES[file], filename=file)

    @app.get("/api/studies/{name}/report.html", tags=["emit"],
             dependencies=[Depends(need_token)])
    def api_report(name: str):
        from hctune import report as _report
        queue_row(name)
        return HTMLResponse(_report.render(_report.collect(cfg.db_path, name)),
                            headers={"Content-Disposition": f'attachment; filename="{name}.html"'})

    # ---- pages ----

    @app.get("/studies", response_class=HTMLResponse, include_in_schema=False)
    def studies_page(request: Request):
        with Database(cfg.db_path) as db:
            rows = [study_brief(q) for q in db.queued()]
        st = {}
        for r in rows:
            if r["state"] != "queued":
                s = trials.get(r["name"], r["state"])
                st[r["name"]] = None if s is None else s.summary(r["options"]["objective"])
        return page("serve_studies.html.j2", request, studies=rows, summaries=st,
                    traces=list_traces(), objectives=_obj.OBJECTIVES, metrics=_obj.METRICS)

    @app.post("/studies", include_in_schema=False, dependencies=[Depends(need_token)])
    def studies_create(traces: list[int] = Form(...), objective: str = Form("mem"),
                       metric: str = Form("time"), trials: int = Form(20),
                       max_memory_overhead: str = Form(""), max_slowdown: str = Form(""),
                       timeout: str = Form(""), validate_runs: int = Form(0),
                       validate_top: int = Form(_validate.DEFAULT_TOP)):
        def num(s):
            try:
                return float(s) if s.strip() else None
            except ValueError:
                raise HTTPException(422, f"not a number: {s!r}") from None
        try:
            req = StudyRequest(traces=traces, objective=objective, metric=metric, trials=trials,
                               max_memory_overhead=num(max_memory_overhead),
                               max_slowdown=num(max_slowdown), timeout=num(timeout),
                               validate_runs=validate_runs, validate_top=validate_top)
        except ValidationError as e:
            first = e.errors()[0]
            raise HTTPException(422, f"{'.'.join(map(str, first['loc']))}: {first['msg']}") \
                from None
        s = create_study(req)
        return RedirectResponse(f"/studies/{s['name']}", status_code=303)

    rendered: dict[tuple[str, bool], bytes] = {}   # study pages, by what they show

    @app.get("/studies/{name}", response_class=HTMLResponse, include_in_schema=False)
    async def study_page(request: Request, name: str):
        # (async: no thread for a page that is read from memory; its JavaScript fills it in)
        study = study_brief(queue_row(name))
        key = (json.dumps(study, sort_keys=True), authorised(request))
        body = rendered.get(key)
        if body is None:
            if len(rendered) >= 256:
                rendered.clear()
            body = rendered[key] = page("serve_study.html.j2", request, study=study).body
        return HTMLResponse(body)

    return app
