"""hctune's own tables: schema versioning, idempotent trace registration, transactions."""

import sqlite3
import threading

import pytest

from hctune import jobs
from hctune.db import SCHEMA_VERSION, Database
from hctune.errors import HctuneError


def test_trace_registration_is_idempotent(tmp_path):
    with Database(tmp_path / "r.db") as db:
        a = db.add_trace(tmp_path / "t1", "aa", command="x", events=10)
        b = db.add_trace(tmp_path / "t2", "bb", events=20)
        assert db.add_trace(tmp_path / "t1", "aa") == a
        assert db.latest_trace()["id"] == b
        m = db.add_measurement(a, "glibc", None, "time", 3, {"ops": 10})
        assert [r["id"] for r in db.measurements(trace_id=a)] == [m]
        assert len(db.query("SELECT * FROM hc_baselines")) == 1


def test_reopen_keeps_data_and_version(tmp_path):
    path = tmp_path / "r.db"
    with Database(path) as db:
        db.add_study("s", "mem", [1], "sqlite:///x")
    with Database(path) as db:
        assert db.study("s")["objective"] == "mem"
        assert db.query_one("SELECT version FROM hc_schema")[0] == SCHEMA_VERSION


def test_newer_schema_is_refused(tmp_path):
    path = tmp_path / "r.db"
    Database(path).close()
    c = sqlite3.connect(path)
    c.execute("UPDATE hc_schema SET version = 999")
    c.commit()
    c.close()
    with pytest.raises(HctuneError, match="newer"):
        Database(path)


def test_opening_a_new_file_waits_while_another_process_holds_it(tmp_path):
    """Switching a new file to WAL needs its exclusive lock, for which SQLite does not wait:
    two searches started together on a new file once failed with "database is locked" (a CI
    run). Here another connection holds the write lock for 0.3 s; the open waits, then
    succeeds."""
    path = tmp_path / "new.db"
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("CREATE TABLE other (x)")     # still in rollback-journal mode
    holder.execute("BEGIN IMMEDIATE")            # its write lock: SQLite fails the switch at once
    released = threading.Event()

    def release():
        released.wait(0.3)
        holder.execute("COMMIT")

    t = threading.Thread(target=release)
    t.start()
    try:
        with Database(path) as d:
            assert d.query_one("SELECT version FROM hc_schema")[0] == SCHEMA_VERSION
            mode = d.query_one("PRAGMA journal_mode")[0]
    finally:
        released.set()
        t.join()
        holder.close()
    assert mode == "wal"


def test_not_a_database(tmp_path):
    path = tmp_path / "junk.db"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(HctuneError, match="cannot open database"):
        Database(path)


def test_failed_transaction_writes_nothing(tmp_path):
    with Database(tmp_path / "r.db") as db:
        with pytest.raises(RuntimeError):
            with db.transaction() as c:
                c.execute("INSERT INTO hc_studies VALUES ('s','mem','[]','x','{}','now')")
                raise RuntimeError("crash mid-write")
        assert db.study("s") is None


def test_a_schema_1_database_is_upgraded_in_place(tmp_path):
    """Schema 2 (issue 10) adds the profiled command to hc_traces and the real-run tables; a
    database written by schema 1 keeps its rows."""
    from hctune import db as _db
    path = tmp_path / "old.db"
    c = sqlite3.connect(path)
    for stmt in _db._MIGRATIONS[1].split(";"):
        if stmt.strip():
            c.execute(stmt)
    c.execute("CREATE TABLE hc_schema (version INTEGER NOT NULL)")
    c.execute("INSERT INTO hc_schema VALUES (1)")
    c.execute("INSERT INTO hc_traces (path, sha256, created) VALUES ('/t', 'aa', 'then')")
    c.commit()
    c.close()
    with Database(path) as db:
        row = db.latest_trace()
        assert row["path"] == "/t" and db.invocation(row) is None
        vid = db.add_validation("s", "perf", ["./app", "x"], "/w", None, 3)
        db.add_real_run(vid, {"candidate": "glibc", "allocator": "glibc", "round": 0,
                              "wall_s": 0.1, "user_s": 0.05, "sys_s": 0.01,
                              "peak_rss_bytes": 4096, "exit_status": 0})
        db.finish_validation(vid, "done", {"winner": {"candidate": "hc generic",
                                                       "setting": "QL_HIGH=72"},
                                           "verdict": "v"})
        assert db.latest_validation("s")["winner"] == "hc generic"
        assert len(db.real_runs(vid)) == 1
        assert db.query_one("SELECT version FROM hc_schema")[0] == SCHEMA_VERSION
    with Database(path) as db:
        tid = db.add_trace(tmp_path / "new", "bb", invocation={"argv": ["./app"], "cwd": "/w",
                                                               "stdin": None})
        assert db.invocation(db.trace(tid)) == {"argv": ["./app"], "cwd": "/w", "stdin": None}


def test_a_study_left_comparing_goes_back_to_running(tmp_path):
    """A closing worker on another machine that stopped beating (requeue_stuck by its beat's
    age), or one here whose process is gone (by is_gone): the study is claimable again."""
    import datetime
    from hctune.db import now
    with Database(tmp_path / "r.db") as db:
        qid = jobs.enqueue(db, "s", [1], {})
        assert jobs.claim(db)["id"] == qid
        assert jobs.start_comparing(db, qid, closer="elsewhere:42:7")
        assert jobs.claim(db) is None                         # comparing: nobody joins it
        long_ago = (datetime.datetime.now(datetime.timezone.utc)
                    - datetime.timedelta(seconds=30)).isoformat(timespec="seconds")
        assert jobs.requeue_stuck(db, long_ago) == []           # it beat just now
        jobs.beat(db, qid, "elsewhere:42:7")
        assert jobs.requeue_stuck(db, "9999") == ["s"]          # its beat is older than that
        row = jobs.claim(db)
        assert row["id"] == qid and row["state"] == "running" and row["closer"] is None
        assert jobs.start_comparing(db, qid, closer="here:1:1")
        assert jobs.start_validating(db, qid)
        assert jobs.requeue_stuck(db, now(), lambda closer: closer == "here:1:1") == ["s"]
        assert jobs.job(db, "s")["state"] == "running"


def test_a_schema_4_database_gains_workers_and_sessions(tmp_path, monkeypatch):
    """Schema 5 (issue 20) adds hc_workers and hc_sessions; a schema 4 database keeps its queue."""
    from hctune import db as _db
    path = tmp_path / "four.db"
    monkeypatch.setattr(_db.schema, "SCHEMA_VERSION", 4)
    with Database(path) as db:
        jobs.enqueue(db, "old", [1], {})
    monkeypatch.undo()
    upgraded_keeps_the_queue_and_has_workers(Database(path))


def upgraded_keeps_the_queue_and_has_workers(db: Database):
    with db:
        assert db.query_one("SELECT version FROM hc_schema")[0] == SCHEMA_VERSION
        assert jobs.job(db, "old")["state"] == "queued"
        jobs.worker_beat(db, "h:1:2", "h", 1, "2026-01-01T00:00:00+00:00", "idle")
        jobs.worker_beat(db, "h:1:2", "h", 1, "2026-01-01T00:00:00+00:00", "running", "old", 4)
        (w,) = jobs.workers(db)
        assert (w["state"], w["study"], w["trial"], w["origin"]) == ("running", "old", 4, None)
        assert jobs.prune_workers(db, "0000") == 0 and jobs.prune_workers(db, "9999") == 1
        with db.transaction() as c:
            c.execute("INSERT INTO hc_sessions (id, created, expires) VALUES ('k', 'a', 'b')")
        assert db.query_one("SELECT expires FROM hc_sessions WHERE id = 'k'")["expires"] == "b"


def _old_real_run(db):
    vid = db.add_validation("s", "mem", ["./app"], "/w", None, 3)
    db.add_real_run(vid, {"candidate": "glibc", "allocator": "glibc", "round": 0, "wall_s": 0.1,
                          "user_s": 0.05, "sys_s": 0.01, "peak_rss_bytes": 4096,
                          "exit_status": 0})
    return vid


def check_rss_curve_columns(db, vid):
    """Schema 6 (issue 18): a real run keeps its RSS curve (mean and final RSS, samples); a run
    stored before it reads them as NULL."""
    assert db.query_one("SELECT version FROM hc_schema")[0] == SCHEMA_VERSION
    db.add_real_run(vid, {"candidate": "jemalloc", "allocator": "jemalloc", "round": 0,
                          "wall_s": 0.1, "user_s": 0.05, "sys_s": 0.01,
                          "peak_rss_bytes": 8192, "exit_status": 0, "rss_mean_bytes": 6144,
                          "rss_final_bytes": 2048, "rss_samples": 12})
    old, new = db.real_runs(vid)
    assert old["rss_mean_bytes"] is None and old["peak_rss_bytes"] == 4096
    assert (new["rss_mean_bytes"], new["rss_final_bytes"], new["rss_samples"]) == (6144, 2048, 12)


def test_a_schema_5_database_gets_the_rss_curve_columns(tmp_path, monkeypatch):
    from hctune import db as _db
    path = tmp_path / "old.db"
    monkeypatch.setattr(_db.schema, "SCHEMA_VERSION", 5)
    monkeypatch.setattr(_db.Database, "_REAL_RUN_COLS", _db.Database._REAL_RUN_COLS[:12])
    with Database(path) as db:
        vid = _old_real_run(db)
        assert db.query_one("SELECT version FROM hc_schema")[0] == 5
    monkeypatch.undo()
    with Database(path) as db:
        check_rss_curve_columns(db, vid)
