"""hctune's tables and how a database gets them: the schema is the sum of the steps in
_MIGRATIONS, written in SQLite's words (PostgreSQL runs the same text with its types mapped:
_POSTGRES_TYPES). A schema change bumps SCHEMA_VERSION and adds a step; an old database is
upgraded on open (migrate), in one transaction, one machine at a time."""

from __future__ import annotations

import re

from hctune.errors import HctuneError, is_driver_error

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


def ddl(dialect: str, stmt: str) -> str:
    """A step's statement in `dialect`'s words."""
    if dialect == "postgresql":
        for pattern, repl in _POSTGRES_TYPES:
            stmt = re.sub(pattern, repl, stmt)
    return stmt


def schema_version(db) -> int | None:
    """The version of the schema the database holds (None: no hctune tables yet)."""
    try:
        row = db.query_one("SELECT version FROM hc_schema")
    except Exception as e:   # the driver's "no such table" (no transaction is left open)
        if not is_driver_error(e) or "hc_schema" not in str(e):
            raise
        return None
    return None if row is None else row[0]


def migrate(db) -> None:
    """Bring the database (a hctune.db.Database) to SCHEMA_VERSION."""
    if schema_version(db) == SCHEMA_VERSION:   # the common case takes no lock
        return
    with db.transaction() as c:
        if db.dialect == "postgresql":
            # machines starting together on an empty database: one creates the tables
            c.execute("SELECT pg_advisory_xact_lock(7231040017)")
        c.execute("CREATE TABLE IF NOT EXISTS hc_schema (version INTEGER NOT NULL)")
        version = c.execute("SELECT version FROM hc_schema").scalar()
        fresh = version is None
        version = version or 0
        if version > SCHEMA_VERSION:
            raise HctuneError(f"database {db.where} has schema {version}, newer than this "
                              f"hctune ({SCHEMA_VERSION}); upgrade hctune")
        for v in range(version + 1, SCHEMA_VERSION + 1):
            for stmt in _MIGRATIONS[v].split(";"):
                if re.sub(r"--[^\n]*", "", stmt).strip():   # not a comment alone
                    c.execute(ddl(db.dialect, stmt))
        if fresh:
            c.execute("INSERT INTO hc_schema VALUES (:v)", v=SCHEMA_VERSION)
        else:
            c.execute("UPDATE hc_schema SET version = :v", v=SCHEMA_VERSION)
