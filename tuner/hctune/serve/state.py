"""What every router of `hctune serve` shares: the server's configuration (Config), and the
Service built from it once per process (the trials cache, the per-thread database connection,
the reads of traces and studies that several routers answer with). A router's endpoint gets it
with `service(request)`."""

from __future__ import annotations

import hmac
import json
import os
import threading
from pathlib import Path

from fastapi import HTTPException, Request
from fastapi.responses import HTMLResponse

from hctune import jobs
from hctune import __version__, templating
from hctune.db import Database, database_url
from hctune.search.storage import open_storage
from hctune.serve.trials import DEFAULT_TTL, TrialsCache

DEFAULT_MAX_UPLOAD = 256 << 20
ENV_CONFIG = "HCTUNE_SERVE_CONFIG"
COOKIE = "hctune_token"


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


def trace_json(row) -> dict:
    return {"id": row["id"], "program": row["command"], "events": row["events"],
            "size_bytes": row["size_bytes"], "tracer": row["tracer"],
            "created": row["created"], "sha256": row["sha256"],
            # profiled with `hctune profile`: its command can run again (validation)
            "runnable": Database.invocation(row) is not None}


def study_brief(q) -> dict:
    return {"name": q["study"], "state": q["state"], "error": q["error"],
            "traces": json.loads(q["trace_ids"]), "options": json.loads(q["options_json"]),
            "created": q["created"], "started": q["started"], "finished": q["finished"]}


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
            raise HTTPException(404, f"no study named {name!r}")
        return q

    def list_traces(self) -> list[dict]:
        with self.db() as db:
            return [trace_json(r) for r in reversed(db.traces())]

    def authorised(self, request: Request) -> bool:
        """No token set, or the request carries it (Authorization: Bearer T, or the cookie the
        /login form sets)."""
        token = self.cfg.token
        if token is None:
            return True
        given = None
        auth = request.headers.get("authorization", "")
        if auth.lower().startswith("bearer "):
            given = auth[7:].strip()
        given = given or request.cookies.get(COOKIE)
        return given is not None and hmac.compare_digest(given.encode(), token.encode())

    def page(self, name: str, request: Request, status_code: int = 200, **ctx) -> HTMLResponse:
        return HTMLResponse(templating.render(name, version=__version__,
                                              need_login=not self.authorised(request), **ctx),
                            status_code=status_code)


def service(request: Request) -> Service:
    return request.app.state.service
