"""What every router of `hctune serve` shares: the server's configuration (Config), and the
Service built from it once per process (the trials cache, the per-thread database connection,
the reads of traces and studies that several routers answer with). A router's endpoint gets it
with `service(request)`."""

from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import hmac
import json
import math
import os
import secrets
import shutil
import threading
import time
from collections import Counter, OrderedDict
from concurrent.futures import Future
from pathlib import Path

from fastapi import HTTPException, Request
from optuna.trial import TrialState
from fastapi.responses import HTMLResponse

from hctune import jobs
from hctune import __version__, templating
from hctune.db import Database, database_url
from hctune.search import options as _options
from hctune.search.storage import OWNER, heartbeat_seconds, open_storage, worker_is_gone
from hctune.serve.compiles import Compiles
from hctune.serve.hosts import Hosts
from hctune.serve.trials import DEFAULT_TTL, TrialsCache

DEFAULT_MAX_UPLOAD = 256 << 20
DEFAULT_UPLOAD_QUOTA = 4 << 30   # all the traces a server stores (serve --upload-quota)
DEFAULT_MAX_TRACES = 1000        # serve --max-traces
DEFAULT_MIN_FREE = 1 << 30       # an upload leaves this much free on the disk (serve --min-free)
ENV_CONFIG = "HCTUNE_SERVE_CONFIG"
COOKIE = "hctune_session"    # a session id signed with the token, never the token itself
CSRF_COOKIE = "hctune_csrf"  # the double-submit CSRF token of the service's forms


class Config:
    def __init__(self, db_path, storage: str, data_dir, token: str | None = None,
                 max_upload: int = DEFAULT_MAX_UPLOAD, trials_ttl: float = DEFAULT_TTL,
                 public_read: bool = False, local_workers: int = 0,
                 bind_host: str = "127.0.0.1", allowed_hosts=(),
                 upload_quota: int = DEFAULT_UPLOAD_QUOTA, max_traces: int = DEFAULT_MAX_TRACES,
                 min_free: int = DEFAULT_MIN_FREE, compile_slots: int = 1):
        self.db_path = str(db_path)
        self.storage = storage
        self.data_dir = Path(data_dir).resolve()
        self.token = token
        self.max_upload = max_upload
        self.trials_ttl = trials_ttl
        self.public_read = public_read
        self.local_workers = local_workers
        # the Host names served (hctune.serve.hosts: DNS rebinding); the address it listens on
        self.bind_host = bind_host
        self.allowed_hosts = tuple(allowed_hosts)
        self.upload_quota = upload_quota     # bytes of traces this server stores, in all
        self.max_traces = max_traces         # traces this server stores
        self.min_free = min_free             # bytes left free on the data directory's disk
        self.compile_slots = compile_slots   # .so compiles at once (hctune.serve.compiles)
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
                           "local_workers": self.local_workers, "bind_host": self.bind_host,
                           "allowed_hosts": list(self.allowed_hosts),
                           "upload_quota": self.upload_quota, "max_traces": self.max_traces,
                           "min_free": self.min_free, "compile_slots": self.compile_slots})

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


_DEFAULTS = _options.stored_defaults()


def allocators_searched(db: Database, name: str) -> list[str] | None:
    """The allocators a study's search runs over, as hc_studies has them once a worker (or
    `hctune search`) started it: "installed" expanded on that machine (HC and every allocator
    installed there), ["hc"] for an HC study; None before that."""
    row = db.study(name)
    if row is None:
        return None
    return list((_stored(row["options_json"], dict) or {}).get("allocators") or ["hc"])


def cli_row(row, state: str = "done") -> dict:
    """A study `hctune search` ran (an hc_studies row, not queued) as the queue's rows read:
    state "running" while a live process runs one of its trials, else "done"
    (Service.cli_state); its trial count is what it holds (the command's --trials is not
    stored: `trials` is None)."""
    opts = _stored(row["options_json"], dict) or {}
    opts["objective"] = row["objective"]
    opts["trials"] = None
    return {"id": None, "study": row["name"], "state": state, "error": None,
            "trace_ids": row["trace_ids"], "options_json": json.dumps(opts),
            "created": row["created"], "started": row["created"], "finished": None,
            "cli": True}


def study_brief(q, fleet: Fleet | None = None) -> dict:
    """A study as the API and the pages show it; a queued one says what it waits for (fleet:
    the workers as hc_workers has them, Service.fleet()); memory: what its mem ratios compare
    (Options.mem_name: footprint, peak RSS, mean RSS or final RSS)."""
    options = _stored(q["options_json"], dict)
    return {"name": q["study"], "state": q["state"],
            "memory": _options.mem_name_of(options or {}),
            "error": q["error"] if options is not None else
            (q["error"] or "its stored options are not readable"),
            "traces": _stored(q["trace_ids"], list) or [],
            # what the row lacks reads as the default (rows of older versions lack some)
            "options": {**_DEFAULTS, **(options or {})},
            "created": q["created"], "started": q["started"], "finished": q["finished"],
            "note": (fleet or Fleet([])).waiting() if q["state"] == "queued" else None,
            "by": "cli" if _has(q, "cli") else "service"}


def _has(row, key) -> bool:
    try:
        return bool(row[key])
    except (KeyError, IndexError):
        return False


# a login lasts this long (HCTUNE_SESSION_SECONDS), unless /logout ends it sooner
SESSION_SECONDS = 12 * 3600
# how long a server process believes a stored session it has read (a logout in another
# process of `serve --http-workers N` reaches it within this)
SESSION_CHECK_SECONDS = 1.0


def session_seconds() -> int:
    try:
        return max(1, int(os.environ.get("HCTUNE_SESSION_SECONDS", SESSION_SECONDS)))
    except ValueError:
        return SESSION_SECONDS


def _session_key(sid: str) -> str:
    """What hc_sessions stores of a session id: its hash (a leaked table opens no session)."""
    return hashlib.sha256(sid.encode()).hexdigest()


# a worker whose last beat is older than this is forgotten (HCTUNE_WORKER_PRUNE_SECONDS)
WORKER_PRUNE_SECONDS = 3600


def prune_seconds() -> float:
    try:
        return float(os.environ.get("HCTUNE_WORKER_PRUNE_SECONDS", WORKER_PRUNE_SECONDS))
    except ValueError:
        return WORKER_PRUNE_SECONDS


def _age(stamp: str | None, now: _dt.datetime) -> float | None:
    try:
        return (now - _dt.datetime.fromisoformat(stamp)).total_seconds()
    except (TypeError, ValueError):
        return None


def worker_json(row, grace: float, now: _dt.datetime) -> dict:
    """A worker as the API and /workers show it. `alive` is judged here: a worker that said it
    stopped, one on this machine whose process is gone, or one silent for longer than the
    grace period (HCTUNE_GRACE_SECONDS) is not; `state` is then "stopped" or "dead"."""
    age = _age(row["beat"], now)
    if row["state"] == "stopped":
        state = "stopped"
    elif worker_is_gone(row["id"]) or age is None or age > grace:
        state = "dead"
    else:
        state = row["state"]
    alive = state not in ("stopped", "dead")
    return {"id": row["id"], "host": row["host"], "pid": row["pid"],
            "local": bool(row["origin"]), "started": row["started"], "beat": row["beat"],
            "seconds_since_beat": None if age is None else max(0, round(age)),
            "state": state, "alive": alive,
            "study": row["study"] if alive else None, "trial": row["trial"] if alive else None,
            "last_study": row["study"]}


class Fleet:
    """The workers of this database (hc_workers) as they were read: what a queued study waits
    for."""

    def __init__(self, workers: list[dict], local: int = 0):
        self.workers = workers
        self.alive = [w for w in workers if w["alive"]]
        self.local = local      # local workers this server starts (serve --workers N)

    def waiting(self) -> str:
        idle = [w for w in self.alive if w["state"] == "idle"]
        if idle:
            return (f"waiting for a worker: {len(idle)} idle, one takes it within seconds "
                    "(see /workers)")
        if self.alive:
            return (f"waiting for a worker: {len(self.alive)} alive, all busy with other "
                    "studies (see /workers)")
        gone = len(self.workers)
        if self.local:
            return (f"waiting for a worker: this server's {self.local} local worker(s) are "
                    "starting or restarting (see /workers)")
        return ("waiting for a worker: none is alive"
                + (f" ({gone} dead or stopped, see /workers)" if gone else "")
                + "; start one on this database (`hctune --db DB worker`, on any machine "
                "that reaches it) or `serve --workers N`")


def login_attempts() -> int:
    try:
        return max(1, int(os.environ.get("HCTUNE_LOGIN_ATTEMPTS", 10)))
    except ValueError:
        return 10


class Failures:
    """Wrong tokens by client address: after `limit` within `window` seconds, that address
    waits (429) until the oldest of them leaves the window; the right token too, so guessing
    stays at `limit` a window."""

    def __init__(self, limit: int, window: float = 60.0, clock=time.monotonic):
        self.limit, self.window, self.clock = limit, window, clock
        self._seen: dict[str, list[float]] = {}
        self._lock = threading.Lock()

    def _recent(self, who: str) -> list[float]:
        now = self.clock()
        kept = [t for t in self._seen.get(who, ()) if now - t < self.window]
        if kept:
            self._seen[who] = kept
        else:
            self._seen.pop(who, None)
        return kept

    def add(self, who: str) -> None:
        with self._lock:
            if len(self._seen) > 65536:
                self._seen.clear()
            self._seen[who] = [*self._recent(who), self.clock()]

    def wait(self, who: str) -> int:
        """Seconds until `who` may try again; 0: now."""
        with self._lock:
            recent = self._recent(who)
            if len(recent) < self.limit:
                return 0
            return max(1, math.ceil(recent[-self.limit] + self.window - self.clock()))


def sweep_uploads(tmp: Path) -> None:
    """Remove the upload directories (<pid>-...) of server processes that are gone (killed
    mid-upload: no `finally` ran)."""
    for p in tmp.iterdir():
        pid = p.name.split("-", 1)[0]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(p, ignore_errors=True)
        except OSError:
            pass


class Service:
    """One per server process (app.state.service)."""

    def __init__(self, cfg: Config, clock=time.time, monotonic=time.monotonic):
        self.cfg = cfg
        # the sessions' clocks (injected by tests): the wall clock their stored expiry is on,
        # and the one measuring how long a stored session read is believed
        self.clock, self.monotonic = clock, monotonic
        self.hosts = Hosts(cfg.bind_host, cfg.allowed_hosts)
        self.failures = Failures(login_attempts())
        self.compiles = Compiles(cfg.compile_slots)
        sweep_uploads(cfg.data_dir / "tmp")
        # what this process made, by kind (reports built, views drawn): GET /api/server
        self.counters: Counter = Counter()
        self._once: OrderedDict = OrderedDict()      # (kind, key) -> Future
        # A study's trials as last read, at most cfg.trials_ttl old, and never older than the
        # study's state in hc_queue (hctune.serve.trials).
        self.trials = TrialsCache(cfg.optuna_storage, cfg.trials_ttl)
        self._local = threading.local()
        # SQLite: one connection per server thread, kept open (opening the file costs more than
        # the read); a server database: its pool's, as many threads would hold more than the
        # pool has
        self._keep = database_url(cfg.db_path).startswith("sqlite")
        self.rendered: dict[tuple[str, bool], bytes] = {}   # study pages, by what they show
        self._lock = threading.Lock()
        self._fleet: tuple[float, Fleet | None] = (0.0, None)
        self._pruned = float("-inf")
        self._sessions: dict[str, tuple[float, float]] = {}   # sid: (checked at, expires)

    def once(self, kind: str, key, make):
        """make() once for (kind, key), its result kept (the 64 newest) and shared by every
        request asking meanwhile: for what a finished study cannot change (its comparison,
        its report). Counted in self.counters[kind]."""
        with self._lock:
            fut = self._once.get((kind, key))
            mine = fut is None
            if mine:
                fut = self._once[(kind, key)] = Future()
                self.counters[kind] += 1
                while len(self._once) > 64:
                    self._once.popitem(last=False)
        if mine:
            try:
                fut.set_result(make())
            except BaseException as e:
                with self._lock:
                    self._once.pop((kind, key), None)
                fut.set_exception(e)
        return fut.result()

    def db(self) -> Database:
        """A new connection to the results database (use it in a `with`)."""
        return Database(self.cfg.db_path)

    def read(self, fn):
        """fn(db) on this thread's kept connection (SQLite), or on a pooled one: the reads
        every request makes."""
        if not self._keep:
            with self.db() as db:
                return fn(db)
        db = getattr(self._local, "db", None)
        if db is None:
            db = self._local.db = self.db()
        return fn(db)

    def queue_row(self, name: str):
        """The study's hc_queue row, read afresh (a change of state shows at once): every poll
        of a live page comes here."""
        q = self.read(lambda db: jobs.job(db, name))
        if q is None:
            with self.db() as db:
                row = db.study(name)
            if row is None:
                raise HTTPException(404, f"no study named {name!r}")
            return cli_row(row, self.cli_state(name))
        return q

    def cli_state(self, name: str) -> str:
        """A study `hctune search` runs or ran: "running" while one of its trials is RUNNING
        under a process that lives (or one of another machine, which cannot be judged here),
        else "done" (finished, or its process was killed). From the trials cache: at most
        its ttl old."""
        snap = self.trials.get(name, self.trials.last_state(name) or "running")
        if snap is None:
            return "done"
        for t in snap.trials:
            if t.state != TrialState.RUNNING:
                continue
            owner = t.system_attrs.get(OWNER)
            if not owner or not worker_is_gone(owner):
                return "running"
        return "done"

    def study_rows(self, db: Database) -> list:
        """Every study in the database, newest first: the queue's, then those `hctune search`
        ran itself (one database, one list, whoever ran the study)."""
        queued = jobs.jobs(db)
        known = {q["study"] for q in queued}
        cli = [cli_row(r, self.cli_state(r["name"])) for r in reversed(db.studies())
               if r["name"] not in known]
        return [*queued, *cli]

    def workers(self) -> list[dict]:
        """Every worker of this database (hc_workers), judged alive or not; those silent for
        longer than prune_seconds() are forgotten first (at most once a minute)."""
        now = _dt.datetime.now(_dt.timezone.utc)
        with self.db() as db:
            if time.monotonic() - self._pruned > 60:
                self._pruned = time.monotonic()
                jobs.prune_workers(db, (now - _dt.timedelta(seconds=prune_seconds()))
                                   .isoformat(timespec="seconds"))
            rows = jobs.workers(db)
        grace = heartbeat_seconds()[1]
        return [worker_json(r, grace, now) for r in rows]

    def fleet(self) -> Fleet:
        """The workers, read at most once a second (the studies list is polled)."""
        with self._lock:
            at, fleet = self._fleet
            if fleet is not None and time.monotonic() - at < 1.0:
                return fleet
        fleet = Fleet(self.workers(), self.cfg.local_workers)
        with self._lock:
            self._fleet = (time.monotonic(), fleet)
        return fleet

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
        """A session cookie's value: a random id and its signature by the token. The session is
        stored (hc_sessions holds the id's hash, never the id) until it expires
        (session_seconds()) or /logout ends it; the token never leaves the client that typed
        it."""
        sid = secrets.token_urlsafe(24)
        now = _dt.datetime.fromtimestamp(self.clock(), _dt.timezone.utc)
        with self.db() as db:
            db.add_session(_session_key(sid), now.isoformat(timespec="seconds"),
                           (now + _dt.timedelta(seconds=session_seconds()))
                           .isoformat(timespec="seconds"))
        return f"{sid}.{self._sign(sid)}"

    def end_session(self, request: Request) -> bool:
        """/logout: the request's session is deleted, so a copy of its cookie no longer
        works (in every server process, within SESSION_CHECK_SECONDS); True when there was
        one."""
        sid = self.signed_sid(request)
        if sid is None:
            return False
        with self._lock:
            self._sessions.pop(sid, None)
        with self.db() as db:
            return db.delete_session(_session_key(sid))

    def signed_sid(self, request: Request) -> str | None:
        value = request.cookies.get(COOKIE)
        if not value or self.cfg.token is None or "." not in value:
            return None
        sid, mac = value.rsplit(".", 1)
        return sid if hmac.compare_digest(mac.encode(), self._sign(sid).encode()) else None

    def session_cookie(self, request: Request) -> str | None:
        """The request's session id when its cookie is signed by this token and the session
        is stored and unexpired, else None. A stored session found is believed for
        SESSION_CHECK_SECONDS (a request asks several times)."""
        sid = self.signed_sid(request)
        if sid is None:
            return None
        now = self.monotonic()
        with self._lock:
            seen = self._sessions.get(sid)
        if seen is not None and now - seen[0] < SESSION_CHECK_SECONDS and \
                seen[1] > self.clock():
            return sid
        stored = self.read(lambda db: db.session_expires(_session_key(sid)))
        expires = None
        if stored is not None:
            with contextlib.suppress(TypeError, ValueError):
                expires = _dt.datetime.fromisoformat(stored).timestamp()
        with self._lock:
            if len(self._sessions) > 4096:
                self._sessions.clear()
            if expires is None or expires <= self.clock():
                self._sessions.pop(sid, None)
                return None
            self._sessions[sid] = (now, expires)
        return sid

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
