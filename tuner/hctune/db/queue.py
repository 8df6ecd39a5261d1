"""The service's job queue (hc_queue; `hctune serve` enqueues, `hctune worker` works): a
study's state machine, each move one transaction so that workers on several machines agree.

    queued ──claim──► running ──start_comparing──► comparing ──start_validating──► validating
                        ▲  (several workers share it)   │                              │
                        └────── requeue_stuck (its closing worker died) ◄──────────────┘
    running / comparing / validating ──finish──► done | failed
    queued / running / comparing / validating ──cancel──► cancelled (its workers stop after
        their current trial: they ask `cancelled` between trials)

`job(db, study)` is one study's row, `jobs(db)` all of them. The workers say what they do in
hc_workers (`worker_beat`, `workers`, `prune_workers`): the service's /workers page. Each move
takes the Database it runs in (these tables' SQL lives here, behind hctune.db like the others';
hctune.jobs gives the moves to the service and the runner).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from hctune.db.connection import now
from hctune.errors import HctuneError

if TYPE_CHECKING:
    from hctune.db import Database


def enqueue(db: Database, study, trace_ids, options: dict) -> int:
    """Queue a study (its traces and options); HctuneError when it is queued already."""
    try:
        with db.transaction() as c:
            if c.execute("SELECT 1 FROM hc_queue WHERE study = :s", s=study).one():
                raise HctuneError(f"study {study!r} is already queued")
            return c.execute(
                "INSERT INTO hc_queue (study, trace_ids, options_json, state, created)"
                " VALUES (:study, :traces, :options, 'queued', :created) RETURNING id",
                study=study, traces=json.dumps(list(trace_ids)),
                options=json.dumps(options, sort_keys=True), created=now()).scalar()
    except Exception as e:   # queued by another server between the check and the insert
        if type(e).__name__ in ("IntegrityError", "UniqueViolation"):
            raise HctuneError(f"study {study!r} is already queued") from None
        raise


def claim(db: Database):
    """The oldest queued study, else the oldest running one (several workers split a study:
    Optuna's storage hands each its own trials), now marked running; None when idle. The
    read-and-mark is one atomic step: SQLite's write lock, taken at BEGIN IMMEDIATE, or
    PostgreSQL's row lock (FOR UPDATE SKIP LOCKED: workers claiming at once take
    different rows, or wait for none)."""
    lock = " FOR UPDATE SKIP LOCKED" if db.dialect == "postgresql" else ""
    with db.transaction() as c:
        row = c.execute("SELECT id FROM hc_queue WHERE state IN ('queued', 'running')"
                        f" ORDER BY state = 'running', id LIMIT 1{lock}").one()
        if row is None:
            return None
        c.execute("UPDATE hc_queue SET state = 'running', workers = workers + 1,"
                  " started = COALESCE(started, :now) WHERE id = :id",
                  now=now(), id=row["id"])
        return c.execute("SELECT * FROM hc_queue WHERE id = :id", id=row["id"]).one()


def finish(db: Database, qid: int, error: str | None = None):
    """The study is done, or failed with `error`."""
    with db.transaction() as c:
        c.execute("UPDATE hc_queue SET state = :state, error = :error, finished = :now"
                  " WHERE id = :id AND state IN ('running', 'comparing', 'validating')",
                  state="failed" if error else "done", error=error, now=now(), id=qid)


def start_comparing(db: Database, qid: int, closer: str | None = None) -> bool:
    """Move a running study to `comparing`; True for the one worker that did it (so the
    other allocators are measured once, and idle workers no longer join the study).
    `closer` names that worker, whose beat() says it is alive."""
    with db.transaction() as c:
        return c.execute("UPDATE hc_queue SET state = 'comparing', closer = :closer,"
                         " beat = :now WHERE id = :id AND state = 'running'",
                         closer=closer, now=now(), id=qid).rowcount == 1


def beat(db: Database, qid: int, closer: str):
    """The closing worker is alive (it calls this while it compares and validates)."""
    with db.transaction() as c:
        c.execute("UPDATE hc_queue SET beat = :now WHERE id = :id AND closer = :closer"
                  " AND state IN ('comparing', 'validating')", now=now(), id=qid,
                  closer=closer)


def requeue_stuck(db: Database, stale_before: str, is_gone=lambda closer: False) -> list[str]:
    """Studies left comparing or validating by a worker that died (its last beat before
    `stale_before`, or `is_gone(closer)` says its process is gone) go back to running, so
    the next worker to claim them finishes them; their names."""
    back = []
    for q in db.query("SELECT id, study, state, closer, beat FROM hc_queue"
                        " WHERE state IN ('comparing', 'validating')"):
        if (q["beat"] or "") < stale_before or (q["closer"] and is_gone(q["closer"])):
            with db.transaction() as c:   # unless it moved on meanwhile
                if c.execute("UPDATE hc_queue SET state = 'running', closer = NULL"
                             " WHERE id = :id AND state = :state"
                             " AND COALESCE(beat, '') = :beat", id=q["id"],
                             state=q["state"], beat=q["beat"] or "").rowcount == 1:
                    back.append(q["study"])
    return back


def start_validating(db: Database, qid: int) -> bool:
    """Move a comparing study to `validating` (real runs of its program, hctune.validate)."""
    return _advance(db, qid, "comparing", "validating")


def _advance(db: Database, qid: int, old: str, new: str) -> bool:
    with db.transaction() as c:
        return c.execute("UPDATE hc_queue SET state = :new WHERE id = :id AND state = :old",
                         new=new, old=old, id=qid).rowcount == 1


def job(db: Database, study: str):
    """The queue's row of `study`, or None."""
    return db.query_one("SELECT * FROM hc_queue WHERE study = :s", s=study)


def jobs(db: Database) -> list:
    """Every queued study's row, newest first."""
    return db.query("SELECT * FROM hc_queue ORDER BY id DESC")


ACTIVE = ("running", "comparing", "validating")


def cancel(db: Database, study: str) -> bool:
    """Stop a study that is queued or being worked on; True when it was."""
    with db.transaction() as c:
        return c.execute("UPDATE hc_queue SET state = 'cancelled', error = 'cancelled',"
                         " finished = :now WHERE study = :s"
                         " AND state IN ('queued', 'running', 'comparing', 'validating')",
                         now=now(), s=study).rowcount == 1


def cancelled(db: Database, qid: int) -> bool:
    row = db.query_one("SELECT state FROM hc_queue WHERE id = :id", id=qid)
    return row is None or row["state"] == "cancelled"


def delete(db: Database, study: str) -> dict:
    """Forget a study that no worker is on: its queue entry, its row in hc_studies, its
    validations and their real runs. What was deleted, counted (the caller deletes its trials
    from the Optuna storage); HctuneError when a worker is on it (cancel it first)."""
    with db.transaction() as c:
        q = c.execute("SELECT state FROM hc_queue WHERE study = :s", s=study).one()
        if q is not None and q["state"] in ACTIVE:
            raise HctuneError(f"study {study!r} is {q['state']}: cancel it first")
        vids = [r["id"] for r in c.execute("SELECT id FROM hc_validations WHERE study = :s",
                                           s=study).all()]
        runs = 0
        for vid in vids:
            runs += c.execute("DELETE FROM hc_real_runs WHERE validation_id = :v",
                              v=vid).rowcount
        return {"queue": c.execute("DELETE FROM hc_queue WHERE study = :s", s=study).rowcount,
                "study": c.execute("DELETE FROM hc_studies WHERE name = :s", s=study).rowcount,
                "validations": c.execute("DELETE FROM hc_validations WHERE study = :s",
                                         s=study).rowcount,
                "real_runs": runs}


# ---- the workers (hc_workers, schema 5): each says what it does, every heartbeat ----

WORKER_STATES = ("idle", "running", "comparing", "validating", "stopped")


def worker_beat(db: Database, wid: str, host: str, pid: int, started: str, state: str,
                study: str | None = None, trial: int | None = None,
                origin: str | None = None):
    """Worker `wid` (hctune.search.storage.this_worker()) is alive and doing `state` (on
    `study`, measuring `trial`); its row is made on its first beat."""
    with db.transaction() as c:
        c.execute("INSERT INTO hc_workers (id, host, pid, started, beat, state, study, trial,"
                  " origin) VALUES (:id, :host, :pid, :started, :beat, :state, :study, :trial,"
                  " :origin) ON CONFLICT (id) DO UPDATE SET beat = excluded.beat,"
                  " state = excluded.state, study = excluded.study, trial = excluded.trial",
                  id=wid, host=host, pid=pid, started=started, beat=now(), state=state,
                  study=study, trial=trial, origin=origin)


def workers(db: Database) -> list:
    """Every worker's row, the latest to start first."""
    return db.query("SELECT * FROM hc_workers ORDER BY started DESC, id")


def prune_workers(db: Database, before: str) -> int:
    """Forget the workers whose last beat is older than `before` (dead or stopped long ago);
    how many."""
    with db.transaction() as c:
        return c.execute("DELETE FROM hc_workers WHERE beat < :before", before=before).rowcount


def forget_worker(db: Database, wid: str) -> int:
    with db.transaction() as c:
        return c.execute("DELETE FROM hc_workers WHERE id = :id", id=wid).rowcount
