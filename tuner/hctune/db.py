"""hctune's own tables in the results database: a SQLite file by default (Optuna's tables share
it), or a PostgreSQL server that the machines of a team share (`--db postgresql://...`).

Schema changes bump SCHEMA_VERSION and add a step to _MIGRATIONS; old databases are upgraded on
open. The steps are written in SQLite's words; on PostgreSQL the same text runs with its types
mapped (_POSTGRES_TYPES). Every write is one transaction, so a crash or Ctrl-C never leaves a
half-written row. SQL goes through SQLAlchemy Core (its drivers, parameters and pooling).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import json
import os
import re
import socket
import sqlite3
import threading
import time
from pathlib import Path

import sqlalchemy
import sqlalchemy.event
import sqlalchemy.exc
import sqlalchemy.pool

from hctune.errors import DatabaseUnavailable, HctuneError, is_driver_error, redact  # noqa: F401 (redact: re-exported)

SCHEMA_VERSION = 6

_MIGRATIONS = {
    1: """
    CREATE TABLE hc_traces (
        id INTEGER PRIMARY KEY,
        path TEXT NOT NULL,          -- absolute path of the trace file
        sha256 TEXT NOT NULL,        -- content hash: the same file registered twice is one row
        command TEXT,                -- the traced command line
        tracer TEXT,                 -- preload | pin | import:text | import:mtrace
        events INTEGER,
        size_bytes INTEGER,
        stats_json TEXT,             -- `hctune stats --json` of the trace, when computed
        created TEXT NOT NULL,
        UNIQUE (sha256)
    );
    CREATE TABLE hc_builds (
        key TEXT PRIMARY KEY,        -- hash of the rendered source + compiler + flags
        setting TEXT NOT NULL,       -- knobs.key() form
        library TEXT NOT NULL,       -- path of the built .so
        compiler TEXT, cflags TEXT,
        created TEXT NOT NULL
    );
    CREATE TABLE hc_measurements (
        id INTEGER PRIMARY KEY,
        trace_id INTEGER REFERENCES hc_traces(id),
        allocator TEXT NOT NULL,     -- hc | glibc | jemalloc | mimalloc | tcmalloc | kingsley | path
        setting TEXT,                -- knobs.key() form for hc, NULL for the others
        metric TEXT NOT NULL,        -- time | instructions
        repeat INTEGER,
        result_json TEXT NOT NULL,   -- the replay's JSON (ops, time_ns_per_op, footprint_bytes...)
        host TEXT,
        created TEXT NOT NULL
    );
    CREATE INDEX hc_measurements_by_trace ON hc_measurements (trace_id, allocator, setting);
    CREATE VIEW hc_baselines AS SELECT * FROM hc_measurements WHERE allocator != 'hc';
    CREATE TABLE hc_studies (
        name TEXT PRIMARY KEY,
        objective TEXT NOT NULL,     -- mem | perf | pareto
        trace_ids TEXT NOT NULL,     -- JSON list of hc_traces.id
        storage TEXT NOT NULL,       -- the Optuna storage URL
        options_json TEXT,
        created TEXT NOT NULL
    );
    """,
    # 2: what `hctune validate` needs to run the profiled program again, and its real runs.
    2: """
    ALTER TABLE hc_traces ADD COLUMN argv_json TEXT;   -- the profiled argv (JSON list), NULL if imported
    ALTER TABLE hc_traces ADD COLUMN cwd TEXT;         -- its working directory
    ALTER TABLE hc_traces ADD COLUMN stdin_path TEXT;  -- its stdin, when that was a regular file
    CREATE TABLE hc_validations (
        id INTEGER PRIMARY KEY,
        study TEXT,                  -- hc_studies.name
        objective TEXT NOT NULL,     -- the real measure: mem (peak RSS) | perf | pareto (wall time)
        argv_json TEXT NOT NULL,     -- the program run (JSON list)
        cwd TEXT NOT NULL,
        stdin_path TEXT,
        runs INTEGER NOT NULL,       -- runs per candidate asked for
        status TEXT NOT NULL,        -- running | done | interrupted | failed
        winner TEXT,                 -- the winning candidate's label (an HC setting)
        winner_setting TEXT,         -- its knobs.key() form
        verdict TEXT,
        summary_json TEXT,           -- hctune.validate's result: medians, intervals, ratios
        host TEXT,
        created TEXT NOT NULL,
        finished TEXT
    );
    CREATE TABLE hc_real_runs (
        id INTEGER PRIMARY KEY,
        validation_id INTEGER NOT NULL REFERENCES hc_validations(id),
        candidate TEXT NOT NULL,     -- label: tuned #1, hc generic, glibc, jemalloc, ...
        allocator TEXT NOT NULL,     -- hc | glibc | jemalloc | mimalloc | tcmalloc | path
        setting TEXT,                -- knobs.key() form for hc
        trial INTEGER,               -- the study's trial, for tuned settings
        round INTEGER NOT NULL,      -- interleaved round (every candidate once per round)
        wall_s REAL, user_s REAL, sys_s REAL,
        peak_rss_bytes INTEGER,      -- ru_maxrss of the program itself
        exit_status INTEGER,         -- exit code, or 128 + signal
        stdout_sha256 TEXT,
        problem TEXT,                -- NULL, or why this run disqualifies the candidate
        created TEXT NOT NULL
    );
    CREATE INDEX hc_real_runs_by_validation ON hc_real_runs (validation_id, candidate);
    """,
    # 3: the queue of studies `hctune serve` accepted and `hctune worker` processes run.
    3: """
    CREATE TABLE hc_queue (
        id INTEGER PRIMARY KEY,
        study TEXT NOT NULL UNIQUE,  -- the Optuna study name (hc_studies.name once started)
        trace_ids TEXT NOT NULL,     -- JSON list of hc_traces.id
        options_json TEXT NOT NULL,  -- hctune.search.study.Options fields the form set
        state TEXT NOT NULL,         -- queued | running | comparing | validating | done | failed
        error TEXT,                  -- one line, when failed
        workers INTEGER NOT NULL DEFAULT 0,  -- workers that joined it so far
        created TEXT NOT NULL,
        started TEXT,
        finished TEXT
    );
    CREATE INDEX hc_queue_by_state ON hc_queue (state, id);
    """,
    # 4: trace contents, for databases that several machines share: a worker on another
    # machine than the one that profiled or received a trace reads it from here.
    4: """
    CREATE TABLE hc_trace_data (
        sha256 TEXT NOT NULL,        -- hc_traces.sha256
        part INTEGER NOT NULL,       -- 0, 1, ...: the file in TRACE_PART-byte pieces, in order
        data BLOB NOT NULL,
        PRIMARY KEY (sha256, part)
    );
    -- the worker that measures the others and validates once the search is done (comparing,
    -- validating), and its last sign of life: a study it left there when it died is taken up
    -- again by another worker (Database.requeue_stuck)
    ALTER TABLE hc_queue ADD COLUMN closer TEXT;   -- hctune.search.storage.this_worker()
    ALTER TABLE hc_queue ADD COLUMN beat TEXT;     -- UTC, ISO 8601
    """,
    # 5: the service's workers as they beat (the /workers page: hctune.jobs.worker_beat), and
    # its login sessions, stored so that /logout ends one everywhere (hctune.serve.state).
    5: """
    CREATE TABLE hc_workers (
        id TEXT PRIMARY KEY,         -- hctune.search.storage.this_worker(): host:pid:start
        host TEXT NOT NULL,
        pid INTEGER NOT NULL,
        started TEXT NOT NULL,       -- UTC, ISO 8601
        beat TEXT NOT NULL,          -- its last sign of life, UTC
        state TEXT NOT NULL,         -- idle | running | comparing | validating | waiting | stopped
        study TEXT,                  -- the study it works on (hc_queue.study), or NULL
        trial INTEGER,               -- the trial it measures (Optuna's number), or NULL
        origin TEXT                  -- 'serve' for a server's local worker, else NULL
    );
    CREATE TABLE hc_sessions (
        id TEXT PRIMARY KEY,         -- sha256 of the session id (the cookie holds the id)
        created TEXT NOT NULL,
        expires TEXT NOT NULL        -- UTC, ISO 8601: the session ends then, or at /logout
    );
    """,
    # 6: each real run's RSS curve (hcrun samples it every few ms), so `validate
    # --memory-measure mean|final` can choose on it and a stored run keeps it
    6: """
    ALTER TABLE hc_real_runs ADD COLUMN rss_mean_bytes INTEGER;   -- time-weighted mean RSS
    ALTER TABLE hc_real_runs ADD COLUMN rss_final_bytes INTEGER;  -- the RSS at the last sample
    ALTER TABLE hc_real_runs ADD COLUMN rss_samples INTEGER;      -- 0: a run shorter than one
    """,
}

# SQLite's types in the steps above, as PostgreSQL spells them (SQLite's INTEGER is 64-bit and
# an INTEGER PRIMARY KEY numbers its rows itself).
_POSTGRES_TYPES = ((r"\bINTEGER PRIMARY KEY\b", "BIGSERIAL PRIMARY KEY"), (r"\bINTEGER\b", "BIGINT"),
                   (r"\bREAL\b", "DOUBLE PRECISION"), (r"\bBLOB\b", "BYTEA"))

TRACE_PART = 4 << 20



def _id_list(text) -> list:
    """A trace_ids column's ids ([] for anything else)."""
    try:
        v = json.loads(text)
    except (TypeError, ValueError):
        return []
    return v if isinstance(v, list) else []


def holds_rows(path, tables) -> bool | None:
    """Whether the SQLite file at `path` has a row in any of `tables` (read-only; None when it
    cannot be read as a database)."""
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            names = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE "
                                               "type = 'table'")}
            return any(con.execute(f"SELECT 1 FROM {t} LIMIT 1").fetchone()
                       for t in tables if t in names)
        finally:
            con.close()
    except sqlite3.Error:
        return None


def now(precise: bool = False) -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(
        timespec="microseconds" if precise else "seconds")


_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def database_url(target) -> str:
    """The SQLAlchemy URL of a results database named by a path or a URL."""
    text = str(target)
    if _URL.match(text):
        if not re.match(r"^(sqlite|postgresql(\+psycopg2)?)://", text):
            raise HctuneError(f"database {redact(text)!r}: use a SQLite file or "
                              "postgresql://user@host/db")
        return text
    return f"sqlite:///{Path(text).resolve()}"


def is_url(target) -> bool:
    return _URL.match(str(target)) is not None


_engines: dict[str, sqlalchemy.engine.Engine] = {}
_checked: set[str] = set()      # server databases whose schema this process has checked
_engines_lock = threading.Lock()


def _wal(con, wait_s: float = 60.0):
    """Put a SQLite file in WAL mode (once per file: the mode is stored in it). Switching takes
    the file's exclusive lock and SQLite does not wait for it (no busy handler), so processes
    opening a new file together get "database is locked" at once; they try again here for as
    long as the connection's own busy timeout would wait."""
    deadline = time.monotonic() + wait_s
    delay = 0.001
    while True:
        try:
            if con.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                con.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or time.monotonic() > deadline:
                raise
        time.sleep(delay)
        delay = min(delay * 2, 0.05)


def _engine(url: str) -> sqlalchemy.engine.Engine:
    """One engine per database and process. SQLite opens the file afresh for each Database (as
    cheap as a pool, and right when the file is replaced); PostgreSQL keeps a pool."""
    with _engines_lock:
        eng = _engines.get(url)
        if eng is not None:
            return eng
        if url.startswith("sqlite"):
            eng = sqlalchemy.create_engine(url, poolclass=sqlalchemy.pool.NullPool,
                                           connect_args={"timeout": 60},
                                           isolation_level="AUTOCOMMIT")

            @sqlalchemy.event.listens_for(eng, "connect")
            def _pragmas(dbapi_connection, record):
                _wal(dbapi_connection)
                dbapi_connection.execute("PRAGMA foreign_keys=ON")
        else:
            eng = sqlalchemy.create_engine(url, pool_size=4, max_overflow=16, pool_pre_ping=True,
                                           connect_args={"connect_timeout": 10},
                                           isolation_level="AUTOCOMMIT")
        _engines[url] = eng
        return eng


class Row(dict):
    """A result row: by column name, or by position as sqlite3.Row allows."""

    def __getitem__(self, key):
        if isinstance(key, int):
            return list(self.values())[key]
        return super().__getitem__(key)


class _Session:
    """What Database.transaction() yields: execute(sql, **params) -> result, with one() and
    all() for the rows."""

    def __init__(self, conn):
        self._conn = conn

    def execute(self, sql: str, **params):
        return _Result(self._conn.execute(sqlalchemy.text(sql), params))


class _Result:
    def __init__(self, result):
        self._r = result
        self.rowcount = result.rowcount

    def one(self) -> Row | None:
        m = self._r.mappings().fetchone() if self._r.returns_rows else None
        return None if m is None else Row(m)

    def all(self) -> list[Row]:
        return [Row(m) for m in self._r.mappings()] if self._r.returns_rows else []

    def scalar(self):
        row = self.one()
        return None if row is None else row[0]


@contextlib.contextmanager
def _driver_errors():
    """SQLAlchemy's wrapping taken off: the driver's own error (sqlite3's, psycopg2's), which
    hctune.cli prints as one line naming the database."""
    try:
        yield
    except sqlalchemy.exc.DBAPIError as e:
        if isinstance(e.orig, BaseException):
            raise e.orig from None
        raise


class Database:
    """A connection to the results database (a SQLite path, or a URL); use as a context manager
    or call close()."""

    def __init__(self, target: str | os.PathLike):
        self.target = str(target)
        if not is_url(target) and Path(target).is_dir():
            raise HctuneError(f"database {target} is a directory")
        self.url = database_url(target)
        self.where = redact(self.url) if is_url(target) else str(target)
        self.dialect = "sqlite" if self.url.startswith("sqlite") else "postgresql"
        # A shared database (a server) holds the traces' contents too: its workers may run on
        # machines that do not have the files.
        self.shared = self.dialect != "sqlite"
        self._conn = None
        try:
            self._conn = _engine(self.url).connect()
            # A server database's schema is checked once per process (a round trip saved on
            # every open: the service opens one per request); a file's on every open, as the
            # file may have been replaced.
            if self.dialect == "sqlite" or self.url not in _checked:
                self._migrate()
                _checked.add(self.url)
        except Exception as e:
            self.close()
            if isinstance(e, sqlalchemy.exc.DBAPIError):
                e = e.orig
            if not is_driver_error(e):
                raise
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise DatabaseUnavailable(f"cannot open database {self.where}: {first}") from None
        except BaseException:
            self.close()
            raise

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def query(self, sql: str, **params) -> list[Row]:
        """The rows of one statement, outside any transaction (each read sees the latest
        committed state)."""
        with _driver_errors():
            return _Result(self._conn.execute(sqlalchemy.text(sql), params)).all()

    def query_one(self, sql: str, **params) -> Row | None:
        rows = self.query(sql, **params)
        return rows[0] if rows else None

    @contextlib.contextmanager
    def transaction(self):
        """One transaction: all of it or none. On SQLite it takes the write lock at once (BEGIN
        IMMEDIATE), so a read-then-write inside it is atomic across processes; PostgreSQL's
        READ COMMITTED plus row locks (FOR UPDATE) and unique keys do the same there."""
        with _driver_errors():
            self._conn.exec_driver_sql("BEGIN IMMEDIATE" if self.dialect == "sqlite" else "BEGIN")
            try:
                yield _Session(self._conn)
            except BaseException:
                self._conn.exec_driver_sql("ROLLBACK")
                raise
            self._conn.exec_driver_sql("COMMIT")

    def _ddl(self, stmt: str) -> str:
        if self.dialect == "postgresql":
            for pattern, repl in _POSTGRES_TYPES:
                stmt = re.sub(pattern, repl, stmt)
        return stmt

    def _schema_version(self) -> int | None:
        try:
            row = self.query_one("SELECT version FROM hc_schema")
        except Exception as e:   # the driver's "no such table" (no transaction is left open)
            if not is_driver_error(e) or "hc_schema" not in str(e):
                raise
            return None
        return None if row is None else row[0]

    def _migrate(self):
        if self._schema_version() == SCHEMA_VERSION:   # the common case takes no lock
            return
        with self.transaction() as c:
            if self.dialect == "postgresql":
                # machines starting together on an empty database: one creates the tables
                c.execute("SELECT pg_advisory_xact_lock(7231040017)")
            c.execute("CREATE TABLE IF NOT EXISTS hc_schema (version INTEGER NOT NULL)")
            version = c.execute("SELECT version FROM hc_schema").scalar()
            fresh = version is None
            version = version or 0
            if version > SCHEMA_VERSION:
                raise HctuneError(f"database {self.where} has schema {version}, newer than this "
                                  f"hctune ({SCHEMA_VERSION}); upgrade hctune")
            for v in range(version + 1, SCHEMA_VERSION + 1):
                for stmt in _MIGRATIONS[v].split(";"):
                    if re.sub(r"--[^\n]*", "", stmt).strip():   # not a comment alone
                        c.execute(self._ddl(stmt))
            if fresh:
                c.execute("INSERT INTO hc_schema VALUES (:v)", v=SCHEMA_VERSION)
            else:
                c.execute("UPDATE hc_schema SET version = :v", v=SCHEMA_VERSION)

    # ---- traces ----

    def add_trace(self, path, sha256, command=None, tracer=None, events=None, size_bytes=None,
                  stats=None, invocation: dict | None = None) -> int:
        """Register a trace (idempotent by content hash); returns its id. In a shared database
        the file's contents are stored too (hc_trace_data), when the file is here."""
        path = str(Path(path).resolve())
        inv = invocation or {}
        # a server's (hctune profile --load): {"argv": [...], "server": {load, ready, ...}}
        argv = {"argv": inv["argv"], "server": inv["server"]} if inv.get("server") else \
            inv.get("argv")
        inv_cols = {"argv": json.dumps(argv) if inv.get("argv") else None,
                    "cwd": inv.get("cwd"), "stdin": inv.get("stdin")}
        with self.transaction() as c:
            tid = c.execute("SELECT id FROM hc_traces WHERE sha256 = :sha", sha=sha256).scalar()
            if tid is not None:
                c.execute("UPDATE hc_traces SET path = :path WHERE id = :id", path=path, id=tid)
                if invocation:
                    c.execute("UPDATE hc_traces SET argv_json = :argv, cwd = :cwd,"
                              " stdin_path = :stdin WHERE id = :id", id=tid, **inv_cols)
            else:
                tid = c.execute(
                    "INSERT INTO hc_traces (path, sha256, command, tracer, events, size_bytes,"
                    " stats_json, created, argv_json, cwd, stdin_path) VALUES (:path, :sha,"
                    " :command, :tracer, :events, :size, :stats, :created, :argv, :cwd, :stdin)"
                    " ON CONFLICT (sha256) DO NOTHING RETURNING id",
                    path=path, sha=sha256, command=command, tracer=tracer, events=events,
                    size=size_bytes, created=now(), **inv_cols,
                    stats=json.dumps(stats, sort_keys=True) if stats is not None else None,
                ).scalar()
                if tid is None:   # registered by another machine meanwhile (PostgreSQL)
                    tid = c.execute("SELECT id FROM hc_traces WHERE sha256 = :sha",
                                    sha=sha256).scalar()
            if self.shared and Path(path).is_file():
                self._store_trace_data(c, sha256, Path(path))
            return tid

    @staticmethod
    def invocation(trace_row) -> dict | None:
        """{"argv", "cwd", "stdin"} of a profiled trace (what `validate` runs again), or None
        for traces that were imported or recorded before hctune kept it."""
        if trace_row is None or not trace_row["argv_json"]:
            return None
        argv = json.loads(trace_row["argv_json"])
        server = argv.get("server") if isinstance(argv, dict) else None
        out = {"argv": argv["argv"] if isinstance(argv, dict) else argv, "cwd": trace_row["cwd"],
               "stdin": trace_row["stdin_path"]}
        if server:
            out["server"] = server    # a server: its load, readiness and stop signal
        return out

    def set_trace_stats(self, trace_id: int, stats: dict):
        with self.transaction() as c:
            c.execute("UPDATE hc_traces SET stats_json = :st WHERE id = :id",
                      st=json.dumps(stats, sort_keys=True), id=trace_id)

    def trace(self, trace_id: int):
        return self.query_one("SELECT * FROM hc_traces WHERE id = :id", id=trace_id)

    def trace_by_path(self, path):
        return self.query_one("SELECT * FROM hc_traces WHERE path = :p ORDER BY id DESC",
                              p=str(Path(path).resolve()))

    def latest_trace(self):
        """The most recently registered trace, or None."""
        return self.query_one("SELECT * FROM hc_traces ORDER BY id DESC LIMIT 1")

    def delete_trace(self, trace_id: int) -> dict | None:
        """Delete a trace no study (queued or run) uses, in one transaction: its row, the
        allocators' measurements on it and its stored contents when no other row shares them.
        None: no such trace; {"users": [study names]}: in use, nothing deleted; else {"row":
        the deleted row, "shared": another row has the same contents, "deleted": counts}."""
        with self.transaction() as c:
            row = c.execute("SELECT * FROM hc_traces WHERE id = :id", id=trace_id).one()
            if row is None:
                return None
            users = sorted({r["name"] for r in c.execute(
                "SELECT study AS name, trace_ids FROM hc_queue UNION ALL "
                "SELECT name, trace_ids FROM hc_studies").all()
                if trace_id in _id_list(r["trace_ids"])})
            if users:
                return {"users": users}
            deleted = {"measurements": c.execute(
                "DELETE FROM hc_measurements WHERE trace_id = :id", id=trace_id).rowcount}
            c.execute("DELETE FROM hc_traces WHERE id = :id", id=trace_id)
            same = c.execute("SELECT 1 FROM hc_traces WHERE sha256 = :h",
                             h=row["sha256"]).one()
            deleted["stored_parts"] = 0 if same else c.execute(
                "DELETE FROM hc_trace_data WHERE sha256 = :h", h=row["sha256"]).rowcount
        return {"row": row, "shared": same is not None, "deleted": deleted}

    def traces(self):
        return self.query("SELECT * FROM hc_traces ORDER BY id")

    # ---- trace contents (shared databases) ----

    @staticmethod
    def _store_trace_data(c, sha256: str, path: Path):
        """The file's contents in TRACE_PART pieces, within the caller's transaction (all or
        none); nothing when they are stored already. The file must hash to `sha256`."""
        if c.execute("SELECT 1 FROM hc_trace_data WHERE sha256 = :sha AND part = 0",
                     sha=sha256).one():
            return
        h = hashlib.sha256()
        with open(path, "rb") as f:
            part = 0
            while chunk := f.read(TRACE_PART):
                h.update(chunk)
                c.execute("INSERT INTO hc_trace_data (sha256, part, data) VALUES (:sha, :part,"
                          " :data)", sha=sha256, part=part, data=chunk)
                part += 1
        if h.hexdigest() != sha256:
            raise HctuneError(f"trace {path} changed while it was being stored; register it "
                              "again")

    def has_trace_data(self, sha256: str) -> bool:
        return self.query_one("SELECT 1 FROM hc_trace_data WHERE sha256 = :sha AND part = 0",
                              sha=sha256) is not None

    def read_trace_data(self, sha256: str, out) -> bool:
        """Write the stored contents of trace `sha256` to the open binary file `out`; False when
        the database does not hold them. One piece is read at a time."""
        n = self.query_one("SELECT COUNT(*) AS n FROM hc_trace_data WHERE sha256 = :sha",
                           sha=sha256)["n"]
        if not n:
            return False
        for part in range(n):
            row = self.query_one("SELECT data FROM hc_trace_data WHERE sha256 = :sha AND"
                                 " part = :part", sha=sha256, part=part)
            if row is None:
                raise HctuneError(f"trace {sha256[:12]}: piece {part} is missing in the database")
            out.write(bytes(row["data"]))
        return True

    # ---- builds ----

    def add_build(self, key, setting, library, compiler=None, cflags=None):
        with self.transaction() as c:
            c.execute("INSERT INTO hc_builds (key, setting, library, compiler, cflags, created)"
                      " VALUES (:key, :setting, :library, :compiler, :cflags, :created)"
                      " ON CONFLICT (key) DO UPDATE SET setting = excluded.setting,"
                      " library = excluded.library, compiler = excluded.compiler,"
                      " cflags = excluded.cflags, created = excluded.created",
                      key=key, setting=setting, library=str(library), compiler=compiler,
                      cflags=cflags, created=now())

    def build(self, key):
        return self.query_one("SELECT * FROM hc_builds WHERE key = :key", key=key)

    # ---- measurements ----

    def add_measurement(self, trace_id, allocator, setting, metric, repeat, result: dict) -> int:
        with self.transaction() as c:
            return c.execute(
                "INSERT INTO hc_measurements (trace_id, allocator, setting, metric, repeat,"
                " result_json, host, created) VALUES (:tid, :allocator, :setting, :metric,"
                " :repeat, :result, :host, :created) RETURNING id",
                tid=trace_id, allocator=allocator, setting=setting, metric=metric, repeat=repeat,
                result=json.dumps(result, sort_keys=True), host=socket.gethostname(),
                created=now()).scalar()

    def measurements(self, trace_id=None, allocator=None, setting=None, metric=None, host=None):
        sql, args = "SELECT * FROM hc_measurements WHERE 1=1", {}
        for col, val in (("trace_id", trace_id), ("allocator", allocator),
                         ("setting", setting), ("metric", metric), ("host", host)):
            if val is not None:
                sql += f" AND {col} = :{col}"
                args[col] = val
        return self.query(sql + " ORDER BY id", **args)

    # ---- studies ----

    def add_study(self, name, objective, trace_ids, storage, options=None):
        with self.transaction() as c:
            c.execute("INSERT INTO hc_studies (name, objective, trace_ids, storage, options_json,"
                      " created) VALUES (:name, :objective, :traces, :storage, :options,"
                      " :created) ON CONFLICT (name) DO NOTHING",
                      name=name, objective=objective, traces=json.dumps(list(trace_ids)),
                      storage=storage, options=json.dumps(options or {}, sort_keys=True),
                      created=now(precise=True))

    def study(self, name):
        return self.query_one("SELECT * FROM hc_studies WHERE name = :name", name=name)

    def studies(self) -> list[Row]:
        """Every study hc_studies holds, oldest first."""
        return self.query("SELECT * FROM hc_studies ORDER BY created, name")

    def study_names(self) -> list[str]:
        return [r["name"] for r in self.query("SELECT name FROM hc_studies ORDER BY created")]

    def latest_study(self, objective: str | None = None, trace_ids=None):
        """The latest study, or the latest of `objective` (on exactly `trace_ids` when given)."""
        sql, args = "SELECT * FROM hc_studies WHERE 1=1", {}
        if objective is not None:
            sql += " AND objective = :objective"
            args["objective"] = objective
        if trace_ids is not None:
            sql += " AND trace_ids = :traces"
            args["traces"] = json.dumps(list(trace_ids))
        # `created` has microseconds (older rows: seconds, then the row order decides)
        order = "rowid" if self.dialect == "sqlite" else "name"
        return self.query_one(sql + f" ORDER BY created DESC, {order} DESC LIMIT 1", **args)

    # ---- the service's sessions ----

    def add_session(self, key: str, created: str, expires: str) -> None:
        """Store a session (its id's hash), dropping those expired by `created`."""
        with self.transaction() as c:
            c.execute("DELETE FROM hc_sessions WHERE expires < :now", now=created)
            c.execute("INSERT INTO hc_sessions (id, created, expires) VALUES (:id, :created,"
                      " :expires)", id=key, created=created, expires=expires)

    def delete_session(self, key: str) -> bool:
        with self.transaction() as c:
            return c.execute("DELETE FROM hc_sessions WHERE id = :id", id=key).rowcount == 1

    def session_expires(self, key: str) -> str | None:
        row = self.query_one("SELECT expires FROM hc_sessions WHERE id = :id", id=key)
        return row["expires"] if row is not None else None

    # ---- validations (real runs of the program) ----

    def add_validation(self, study, objective, argv, cwd, stdin_path, runs) -> int:
        with self.transaction() as c:
            return c.execute(
                "INSERT INTO hc_validations (study, objective, argv_json, cwd, stdin_path, runs,"
                " status, host, created) VALUES (:study, :objective, :argv, :cwd, :stdin, :runs,"
                " 'running', :host, :created) RETURNING id",
                study=study, objective=objective, argv=json.dumps(list(argv)), cwd=str(cwd),
                stdin=stdin_path, runs=runs, host=socket.gethostname(), created=now()).scalar()

    _REAL_RUN_COLS = ("candidate", "allocator", "setting", "trial", "round", "wall_s", "user_s",
                      "sys_s", "peak_rss_bytes", "exit_status", "stdout_sha256", "problem",
                      "rss_mean_bytes", "rss_final_bytes", "rss_samples")

    def add_real_run(self, validation_id, run: dict) -> int:
        cols = self._REAL_RUN_COLS
        with self.transaction() as c:
            return c.execute(
                f"INSERT INTO hc_real_runs (validation_id, {', '.join(cols)}, created)"
                f" VALUES (:validation_id, {', '.join(':' + k for k in cols)}, :created)"
                " RETURNING id",
                validation_id=validation_id, created=now(),
                **{k: run.get(k) for k in cols}).scalar()

    def finish_validation(self, validation_id, status, summary: dict | None = None):
        s = summary or {}
        w = s.get("winner") or {}
        with self.transaction() as c:
            c.execute("UPDATE hc_validations SET status = :status, winner = :winner,"
                      " winner_setting = :setting, verdict = :verdict, summary_json = :summary,"
                      " finished = :finished WHERE id = :id",
                      status=status, winner=w.get("candidate"), setting=w.get("setting"),
                      verdict=s.get("verdict"),
                      summary=json.dumps(summary, sort_keys=True) if summary else None,
                      finished=now(), id=validation_id)

    def validation(self, validation_id):
        return self.query_one("SELECT * FROM hc_validations WHERE id = :id", id=validation_id)

    def latest_validation(self, study: str | None = None, done: bool = True):
        sql, args = "SELECT * FROM hc_validations WHERE 1=1", {}
        if study is not None:
            sql += " AND study = :study"
            args["study"] = study
        if done:
            sql += " AND status = 'done'"
        return self.query_one(sql + " ORDER BY id DESC LIMIT 1", **args)

    def real_runs(self, validation_id):
        return self.query("SELECT * FROM hc_real_runs WHERE validation_id = :id ORDER BY id",
                          id=validation_id)
