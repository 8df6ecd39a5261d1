"""What every router of `hctune serve` shares: the server's configuration (Config), and the
Service built from it once per process (the trials cache, the per-thread database connection,
the reads of traces and studies that several routers answer with). A router's endpoint gets it
with `service(request)`."""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import os
import secrets
import threading
from pathlib import Path

from fastapi import HTTPException, Request
from fastapi.responses import HTMLResponse

from hctune import jobs
from hctune import __version__, templating
from hctune.db import Database, database_url
from hctune.search import options as _options
from hctune.search.storage import open_storage
from hctune.serve.trials import DEFAULT_TTL, TrialsCache

DEFAULT_MAX_UPLOAD = 256 << 20
ENV_CONFIG = "HCTUNE_SERVE_CONFIG"
COOKIE = "hctune_session"    # a session id signed with the token, never the token itself
CSRF_COOKIE = "hctune_csrf"  # the double-submit CSRF token of the service's forms


class Config:
    def __init__(self, db_path, storage: str, data_dir, token: str | None = None,
                 max_upload: int = DEFAULT_MAX_UPLOAD, trials_ttl: float = DEFAULT_TTL,
                 public_read: bool = False, local_workers: int = 0):
        self.db_path = str(db_path)
        self.storage = storage
        self.data_dir = Path(data_dir).resolve()
        self.token = token
        self.max_upload = max_upload
        self.trials_ttl = trials_ttl
        self.public_read = public_read
        self.local_workers = local_workers
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
                           "max_upload": self.max_upload, "trials_ttl": self.trials_ttl,
                           "public_read": self.public_read,
                           "local_workers": self.local_workers})

    @classmethod
    def from_env(cls) -> Config:
        return cls(**json.loads(os.environ[ENV_CONFIG]))


def trace_json(row) -> dict:
    return {"id": row["id"], "program": row["command"], "events": row["events"],
            "size_bytes": row["size_bytes"], "tracer": row["tracer"],
            "created": row["created"], "sha256": row["sha256"],
            # profiled with `hctune profile`: its command can run again (validation)
            "runnable": Database.invocation(row) is not None}


def _finite(v):
    """A stored value as JSON can say it: infinities and NaN (which Python's json reads) become
    None."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {str(k): _finite(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_finite(x) for x in v]
    return v


def _stored(text, kind: type):
    """A JSON column of a stored row, or None when it is not JSON of that kind: one bad row
    (written by an older version, by hand, by a bug) never breaks a list."""
    try:
        v = json.loads(text) if text else None
    except (TypeError, ValueError):
        return None
    return _finite(v) if isinstance(v, kind) else None


_DEFAULTS = _options.to_json(_options.Options())


def cli_row(row) -> dict:
    """A study `hctune search` ran (an hc_studies row, not queued) as the queue's rows read:
    state "cli" (it runs, or ran, in that command; the page shows its trials as they come)."""
    opts = _stored(row["options_json"], dict) or {}
    opts["objective"] = row["objective"]
    return {"id": None, "study": row["name"], "state": "cli", "error": None,
            "trace_ids": row["trace_ids"], "options_json": json.dumps(opts),
            "created": row["created"], "started": row["created"], "finished": None}


def study_brief(q, local_workers: int | None = None) -> dict:
    """A study as the API and the pages show it; a queued one says what it waits for
    (local_workers: how many workers this server started)."""
    options = _stored(q["options_json"], dict)
    return {"name": q["study"], "state": q["state"],
            "error": q["error"] if options is not None else
            (q["error"] or "its stored options are not readable"),
            "traces": _stored(q["trace_ids"], list) or [],
            # what the row lacks reads as the default (rows of older versions lack some)
            "options": {**_DEFAULTS, **(options or {})},
            "created": q["created"], "started": q["started"], "finished": q["finished"],
            "note": _waiting(local_workers) if q["state"] == "queued" else None}


def _waiting(local_workers: int | None) -> str:
    if local_workers:
        return (f"waiting for a worker: this server runs {local_workers} (busy with other "
                "studies, or starting)")
    return ("waiting for a worker: this server runs none; start one on this database "
            "(`hctune --db DB worker`, on any machine that reaches it) or `serve --workers N`")


class Service:
    """One per server process (app.state.service)."""

    def __init__(self, cfg: Config):
        self.cfg = cfg
        # A study's trials as last read, at most cfg.trials_ttl old, and never older than the
        # study's state in hc_queue (hctune.serve.trials).
        self.trials = TrialsCache(cfg.optuna_storage, cfg.trials_ttl)
        self._local = threading.local()
        # SQLite: one connection per server thread, kept open (opening the file costs more than
        # the read); a server database: its pool's, as many threads would hold more than the
        # pool has
        self._keep = database_url(cfg.db_path).startswith("sqlite")
        self.rendered: dict[tuple[str, bool], bytes] = {}   # study pages, by what they show

    def db(self) -> Database:
        """A new connection to the results database (use it in a `with`)."""
        return Database(self.cfg.db_path)

    def queue_row(self, name: str):
        """The study's hc_queue row, read afresh (a change of state shows at once): every poll
        of a live page comes here."""
        if not self._keep:
            with self.db() as db:
                q = jobs.job(db, name)
        else:
            db = getattr(self._local, "db", None)
            if db is None:
                db = self._local.db = self.db()
            q = jobs.job(db, name)
        if q is None:
            with self.db() as db:
                row = db.study(name)
            if row is None:
                raise HTTPException(404, f"no study named {name!r}")
            return cli_row(row)
        return q

    def study_rows(self, db: Database) -> list:
        """Every study in the database, newest first: the queue's, then those `hctune search`
        ran itself (one database, one list, whoever ran the study)."""
        queued = jobs.jobs(db)
        known = {q["study"] for q in queued}
        cli = [cli_row(r) for r in reversed(db.query("SELECT * FROM hc_studies ORDER BY created"))
               if r["name"] not in known]
        return [*queued, *cli]

    def list_traces(self) -> list[dict]:
        with self.db() as db:
            return [trace_json(r) for r in reversed(db.traces())]

    def authorised(self, request: Request) -> bool:
        """No token set, or the request carries it (Authorization: Bearer T, or the cookie the
        /login form sets)."""
        token = self.cfg.token
        if token is None:
            return True
        auth = request.headers.get("authorization", "")
        if auth.lower().startswith("bearer "):
            return hmac.compare_digest(auth[7:].strip().encode(), token.encode())
        return self.session_cookie(request) is not None

    def _sign(self, sid: str) -> str:
        return hmac.new(self.cfg.token.encode(), b"hctune-session:" + sid.encode(),
                        hashlib.sha256).hexdigest()

    def new_session(self) -> str:
        """A session cookie's value: a random id and its signature by the token (every server
        process checks it without shared state; the token itself never leaves the client that
        typed it)."""
        sid = secrets.token_urlsafe(18)
        return f"{sid}.{self._sign(sid)}"

    def session_cookie(self, request: Request) -> str | None:
        """The request's session id when its cookie is signed by this token, else None."""
        value = request.cookies.get(COOKIE)
        if not value or self.cfg.token is None or "." not in value:
            return None
        sid, mac = value.rsplit(".", 1)
        return sid if hmac.compare_digest(mac.encode(), self._sign(sid).encode()) else None

    def page(self, name: str, request: Request, status_code: int = 200, forms: bool = True,
             **ctx) -> HTMLResponse:
        """A page; its forms carry the CSRF token of the browser's cookie (set here when it
        has none: hctune.serve.guard). A page without forms (forms=False) is the same for
        every browser, so it can be cached."""
        csrf = request.cookies.get(CSRF_COOKIE) or secrets.token_urlsafe(18) if forms else ""
        r = HTMLResponse(templating.render(name, version=__version__, csrf=csrf,
                                           need_login=not self.authorised(request),
                                           logged_in=self.session_cookie(request) is not None,
                                           **ctx), status_code=status_code)
        if forms and CSRF_COOKIE not in request.cookies:
            r.set_cookie(CSRF_COOKIE, csrf, samesite="strict", httponly=True)
        return r


def service(request: Request) -> Service:
    return request.app.state.service
