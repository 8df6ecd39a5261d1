"""Registering traces in the results database (hctune.db), said once: every way a trace enters
(profile, import, upload, or a file named to replay, compare or search) stores the same
columns — content hash, events, command, statistics, and the tracer and invocation when known —
and "no trace named: the latest one" is decided here.

register(db, path, tracer, st, invocation)  a trace hctune just wrote (profile, import, upload)
named(db, path)                             a file named on the command line: checked, registered
latest(db)                                  the latest registered trace whose file is available
stats_of(db, row)                           its statistics, computed and stored on first use
local_path(db, row)                         where a registered trace's file is on this machine
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

from hctune.db import Database
from hctune.errors import HctuneError
from hctune.files import sha256
from hctune.trace.reader import open_trace
from hctune.trace.stats import stats as trace_stats
from hctune.trace.store import available, local_path  # noqa: F401  (local_path: re-exported)


@contextlib.contextmanager
def _database(db_or_path):
    if isinstance(db_or_path, Database):
        yield db_or_path
    else:
        with Database(db_or_path) as db:
            yield db


def register(db_or_path, path, tracer: str | None = None, st: dict | None = None,
             invocation: dict | None = None, sha: str | None = None,
             full: bool = True) -> tuple[int, dict]:
    """Add the trace (idempotent by content); returns (trace id, its statistics).
    `invocation` ({"argv", "cwd", "stdin"}) is how the program was run, for `hctune validate`;
    `sha`: its content hash when the caller has it already (profile hashes while it reads the
    chunk index).  full=False: `st` is a summary (hctune.trace.stats.summary: command and
    events only); the statistics are left for named() to compute when a command needs them."""
    path = Path(path)
    st = st if st is not None else trace_stats(path)
    with _database(db_or_path) as db:
        tid = db.add_trace(path, sha or sha256(path), command=st.get("command"), tracer=tracer,
                           events=st["events"], size_bytes=path.stat().st_size,
                           stats=st if full else None, invocation=invocation)
    return tid, st


def named(db: Database, path):
    """A trace file named on the command line: checked (a file, not empty, a trace with events),
    registered with its statistics when its contents are new (a registered trace without them
    gets them now); its hc_traces row."""
    p = Path(path)
    if not p.is_file():
        raise HctuneError(f"trace {path} is a directory, not a trace file" if p.is_dir() else
                          f"trace {path} does not exist")
    if p.stat().st_size == 0:
        raise HctuneError(f"trace {path} is empty")
    t = open_trace(p)  # TraceError (an HctuneError) for anything that is not a trace
    if t.count == 0:
        raise HctuneError(f"trace {path} has no allocation events")
    sha = sha256(p)
    row = db.trace_by_path(p)
    if row is None or row["sha256"] != sha:
        tid = db.add_trace(p, sha, command=t.header.command, events=t.count,
                           size_bytes=p.stat().st_size)
        row = db.trace(tid)
    if row["stats_json"] is None:
        db.set_trace_stats(row["id"], trace_stats(p))
        row = db.trace(row["id"])
    return row


def stats_of(db: Database, row) -> dict:
    """A registered trace's statistics: stored ones, or computed from its file now and stored
    (`hctune profile` leaves them to the first command that needs them)."""
    if row["stats_json"]:
        return json.loads(row["stats_json"])
    st = trace_stats(local_path(db, row))
    db.set_trace_stats(row["id"], st)
    return st


def latest(db: Database):
    """The most recently registered trace, when its file (or the database's copy) is here."""
    row = db.latest_trace()
    if row is None:
        raise HctuneError("no trace given and none in the database; run `hctune profile ./app` "
                          "first, or name a trace file")
    if not available(db, row):
        raise HctuneError(f"the latest trace {row['path']} no longer exists; name a trace file")
    return row
