"""hctune's own tables in the results database (SQLite by default; Optuna's tables share the file).

Schema changes bump SCHEMA_VERSION and add a step to _MIGRATIONS; old databases are upgraded on
open. Every write is one transaction, so a crash or Ctrl-C never leaves a half-written row.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import socket
import sqlite3
from pathlib import Path

from hctune.errors import HctuneError

SCHEMA_VERSION = 3

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
        state TEXT NOT NULL,         -- queued | running | comparing | done | failed
        error TEXT,                  -- one line, when failed
        workers INTEGER NOT NULL DEFAULT 0,  -- workers that joined it so far
        created TEXT NOT NULL,
        started TEXT,
        finished TEXT
    );
    CREATE INDEX hc_queue_by_state ON hc_queue (state, id);
    """,
}


def now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


class Database:
    """A connection to the results database; use as a context manager or call close()."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        if self.path.is_dir():
            raise HctuneError(f"database {self.path} is a directory")
        try:
            self.conn = sqlite3.connect(str(self.path), timeout=60, isolation_level=None)
            self.conn.row_factory = sqlite3.Row
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA foreign_keys=ON")
            self._migrate()
        except sqlite3.DatabaseError as e:
            raise HctuneError(f"cannot open database {self.path}: {e}") from None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        self.conn.close()

    @contextlib.contextmanager
    def transaction(self):
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield self.conn
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    def _migrate(self):
        try:   # the common case, an up-to-date schema, takes no write lock
            row = self.conn.execute("SELECT version FROM hc_schema").fetchone()
            if row is not None and row[0] == SCHEMA_VERSION:
                return
        except sqlite3.OperationalError:
            pass   # no hc_schema yet
        with self.transaction() as c:
            c.execute("CREATE TABLE IF NOT EXISTS hc_schema (version INTEGER NOT NULL)")
            row = c.execute("SELECT version FROM hc_schema").fetchone()
            version = row[0] if row else 0
            if version > SCHEMA_VERSION:
                raise HctuneError(f"database {self.path} has schema {version}, newer than this "
                                  f"hctune ({SCHEMA_VERSION}); upgrade hctune")
            for v in range(version + 1, SCHEMA_VERSION + 1):
                for stmt in _MIGRATIONS[v].split(";"):
                    if stmt.strip():
                        c.execute(stmt)
            if row is None:
                c.execute("INSERT INTO hc_schema VALUES (?)", (SCHEMA_VERSION,))
            else:
                c.execute("UPDATE hc_schema SET version = ?", (SCHEMA_VERSION,))

    # ---- traces ----

    def add_trace(self, path, sha256, command=None, tracer=None, events=None, size_bytes=None,
                  stats=None, invocation: dict | None = None) -> int:
        """Register a trace (idempotent by content hash); returns its id."""
        path = str(Path(path).resolve())
        with self.transaction() as c:
            row = c.execute("SELECT id FROM hc_traces WHERE sha256 = ?", (sha256,)).fetchone()
            inv = invocation or {}
            inv_cols = (json.dumps(inv["argv"]) if inv.get("argv") else None, inv.get("cwd"),
                        inv.get("stdin"))
            if row:
                c.execute("UPDATE hc_traces SET path = ? WHERE id = ?", (path, row[0]))
                if invocation:
                    c.execute("UPDATE hc_traces SET argv_json = ?, cwd = ?, stdin_path = ?"
                              " WHERE id = ?", (*inv_cols, row[0]))
                return row[0]
            cur = c.execute(
                "INSERT INTO hc_traces (path, sha256, command, tracer, events, size_bytes,"
                " stats_json, created, argv_json, cwd, stdin_path)"
                " VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (path, sha256, command, tracer, events, size_bytes,
                 json.dumps(stats, sort_keys=True) if stats is not None else None, now(),
                 *inv_cols))
            return cur.lastrowid

    @staticmethod
    def invocation(trace_row) -> dict | None:
        """{"argv", "cwd", "stdin"} of a profiled trace (what `validate` runs again), or None
        for traces that were imported or recorded before hctune kept it."""
        if trace_row is None or not trace_row["argv_json"]:
            return None
        return {"argv": json.loads(trace_row["argv_json"]), "cwd": trace_row["cwd"],
                "stdin": trace_row["stdin_path"]}

    def set_trace_stats(self, trace_id: int, stats: dict):
        with self.transaction() as c:
            c.execute("UPDATE hc_traces SET stats_json = ? WHERE id = ?",
                      (json.dumps(stats, sort_keys=True), trace_id))

    def trace(self, trace_id: int):
        return self.conn.execute("SELECT * FROM hc_traces WHERE id = ?", (trace_id,)).fetchone()

    def trace_by_path(self, path):
        return self.conn.execute("SELECT * FROM hc_traces WHERE path = ? ORDER BY id DESC",
                                 (str(Path(path).resolve()),)).fetchone()

    def latest_trace(self):
        """The most recently registered trace, or None."""
        return self.conn.execute("SELECT * FROM hc_traces ORDER BY id DESC LIMIT 1").fetchone()

    def traces(self):
        return self.conn.execute("SELECT * FROM hc_traces ORDER BY id").fetchall()

    # ---- builds ----

    def add_build(self, key, setting, library, compiler=None, cflags=None):
        with self.transaction() as c:
            c.execute("INSERT OR REPLACE INTO hc_builds VALUES (?,?,?,?,?,?)",
                      (key, setting, str(library), compiler, cflags, now()))

    def build(self, key):
        return self.conn.execute("SELECT * FROM hc_builds WHERE key = ?", (key,)).fetchone()

    # ---- measurements ----

    def add_measurement(self, trace_id, allocator, setting, metric, repeat, result: dict) -> int:
        with self.transaction() as c:
            cur = c.execute(
                "INSERT INTO hc_measurements (trace_id, allocator, setting, metric, repeat,"
                " result_json, host, created) VALUES (?,?,?,?,?,?,?,?)",
                (trace_id, allocator, setting, metric, repeat,
                 json.dumps(result, sort_keys=True), socket.gethostname(), now()))
            return cur.lastrowid

    def measurements(self, trace_id=None, allocator=None, setting=None, metric=None):
        sql, args = "SELECT * FROM hc_measurements WHERE 1=1", []
        for col, val in (("trace_id", trace_id), ("allocator", allocator),
                         ("setting", setting), ("metric", metric)):
            if val is not None:
                sql += f" AND {col} = ?"
                args.append(val)
        return self.conn.execute(sql + " ORDER BY id", args).fetchall()

    # ---- studies ----

    def add_study(self, name, objective, trace_ids, storage, options=None):
        with self.transaction() as c:
            c.execute("INSERT OR IGNORE INTO hc_studies VALUES (?,?,?,?,?,?)",
                      (name, objective, json.dumps(list(trace_ids)), storage,
                       json.dumps(options or {}, sort_keys=True), now()))

    def study(self, name):
        return self.conn.execute("SELECT * FROM hc_studies WHERE name = ?", (name,)).fetchone()

    def latest_study(self, objective: str | None = None, trace_ids=None):
        """The latest study, or the latest of `objective` (on exactly `trace_ids` when given)."""
        sql, args = "SELECT * FROM hc_studies WHERE 1=1", []
        if objective is not None:
            sql += " AND objective = ?"
            args.append(objective)
        if trace_ids is not None:
            sql += " AND trace_ids = ?"
            args.append(json.dumps(list(trace_ids)))
        return self.conn.execute(sql + " ORDER BY created DESC, rowid DESC LIMIT 1",
                                 args).fetchone()

    # ---- validations (real runs of the program) ----

    def add_validation(self, study, objective, argv, cwd, stdin_path, runs) -> int:
        with self.transaction() as c:
            cur = c.execute(
                "INSERT INTO hc_validations (study, objective, argv_json, cwd, stdin_path, runs,"
                " status, host, created) VALUES (?,?,?,?,?,?,'running',?,?)",
                (study, objective, json.dumps(list(argv)), str(cwd), stdin_path, runs,
                 socket.gethostname(), now()))
            return cur.lastrowid

    def add_real_run(self, validation_id, run: dict) -> int:
        cols = ("candidate", "allocator", "setting", "trial", "round", "wall_s", "user_s",
                "sys_s", "peak_rss_bytes", "exit_status", "stdout_sha256", "problem")
        with self.transaction() as c:
            cur = c.execute(
                f"INSERT INTO hc_real_runs (validation_id, {', '.join(cols)}, created)"
                f" VALUES (?, {', '.join('?' * len(cols))}, ?)",
                (validation_id, *(run.get(k) for k in cols), now()))
            return cur.lastrowid

    def finish_validation(self, validation_id, status, summary: dict | None = None):
        s = summary or {}
        w = s.get("winner") or {}
        with self.transaction() as c:
            c.execute("UPDATE hc_validations SET status = ?, winner = ?, winner_setting = ?,"
                      " verdict = ?, summary_json = ?, finished = ? WHERE id = ?",
                      (status, w.get("candidate"), w.get("setting"), s.get("verdict"),
                       json.dumps(summary, sort_keys=True) if summary else None, now(),
                       validation_id))

    def validation(self, validation_id):
        return self.conn.execute("SELECT * FROM hc_validations WHERE id = ?",
                                 (validation_id,)).fetchone()

    def latest_validation(self, study: str | None = None, done: bool = True):
        sql, args = "SELECT * FROM hc_validations WHERE 1=1", []
        if study is not None:
            sql += " AND study = ?"
            args.append(study)
        if done:
            sql += " AND status = 'done'"
        return self.conn.execute(sql + " ORDER BY id DESC LIMIT 1", args).fetchone()

    def real_runs(self, validation_id):
        return self.conn.execute("SELECT * FROM hc_real_runs WHERE validation_id = ? ORDER BY id",
                                 (validation_id,)).fetchall()

    # ---- the queue (hctune serve / hctune worker) ----

    def enqueue(self, study, trace_ids, options: dict) -> int:
        with self.transaction() as c:
            if c.execute("SELECT 1 FROM hc_queue WHERE study = ?", (study,)).fetchone():
                raise HctuneError(f"study {study!r} is already queued")
            cur = c.execute("INSERT INTO hc_queue (study, trace_ids, options_json, state, created)"
                            " VALUES (?,?,?,'queued',?)",
                            (study, json.dumps(list(trace_ids)),
                             json.dumps(options, sort_keys=True), now()))
            return cur.lastrowid

    def claim(self):
        """The oldest queued study, else the oldest running one (several workers split a study:
        Optuna's storage hands each its own trials), now marked running; None when idle. The
        write lock SQLite takes at BEGIN IMMEDIATE makes the read-and-mark one atomic step."""
        with self.transaction() as c:
            row = c.execute("SELECT * FROM hc_queue WHERE state IN ('queued', 'running')"
                            " ORDER BY state = 'running', id LIMIT 1").fetchone()
            if row is None:
                return None
            c.execute("UPDATE hc_queue SET state = 'running', workers = workers + 1,"
                      " started = COALESCE(started, ?) WHERE id = ?", (now(), row["id"]))
            return c.execute("SELECT * FROM hc_queue WHERE id = ?", (row["id"],)).fetchone()

    def finish_queued(self, qid: int, error: str | None = None):
        with self.transaction() as c:
            c.execute("UPDATE hc_queue SET state = ?, error = ?, finished = ? WHERE id = ?"
                      " AND state IN ('running', 'comparing')",
                      ("failed" if error else "done", error, now(), qid))

    def start_comparing(self, qid: int) -> bool:
        """Move a running study to `comparing`; True for the one worker that did it (so the
        other allocators are measured once, and idle workers no longer join the study)."""
        with self.transaction() as c:
            return c.execute("UPDATE hc_queue SET state = 'comparing' WHERE id = ?"
                             " AND state = 'running'", (qid,)).rowcount == 1

    def queued(self, study=None):
        if study is not None:
            return self.conn.execute("SELECT * FROM hc_queue WHERE study = ?", (study,)).fetchone()
        return self.conn.execute("SELECT * FROM hc_queue ORDER BY id DESC").fetchall()


def open_db(path) -> Database:
    return Database(path)
