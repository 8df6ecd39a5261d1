"""hctune's own tables on a real PostgreSQL server (`--db postgresql://...`): the same Database
API as on SQLite, trace contents stored for other machines, the queue claimed with row locks
(FOR UPDATE SKIP LOCKED), and machines that create the schema at the same moment."""

import multiprocessing
import threading

import pytest

from hctune import jobs
from hctune.db import SCHEMA_VERSION, Database
from hctune.errors import HctuneError
from hctune.files import sha256
from search_support import Postgres

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def pg(tmp_path_factory):
    server = Postgres(tmp_path_factory.mktemp("pg")).start()
    yield server
    server.stop()


def _open(url):
    Database(url).close()


def test_schema_created_once_by_processes_starting_together(pg):
    url = pg.url.rsplit("/", 1)[0] + "/postgres"   # an empty database of its own
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_open, args=(url,)) for _ in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    with Database(url) as db:
        assert db.query_one("SELECT version FROM hc_schema")["version"] == SCHEMA_VERSION
        assert len(db.query("SELECT * FROM hc_schema")) == 1


def test_a_schema_5_database_is_upgraded(pg, monkeypatch):
    """The schema 6 step (real runs' RSS curve columns) on PostgreSQL: a database written by
    schema 5 keeps its runs and gains the columns."""
    from hctune import db as _db
    from test_core_db import _old_real_run, check_rss_curve_columns
    pg._run(str(pg.bin / "createdb"), "-h", "127.0.0.1", "-p", str(pg.port), "-U", "hctune",
            "schema5")
    url = pg.url.rsplit("/", 1)[0] + "/schema5"
    monkeypatch.setattr(_db.schema, "SCHEMA_VERSION", 5)
    monkeypatch.setattr(_db.Database, "_REAL_RUN_COLS", _db.Database._REAL_RUN_COLS[:12])
    with Database(url) as db:
        vid = _old_real_run(db)
    monkeypatch.undo()
    _db._checked.discard(url)     # as a new process would: a server's schema is checked once
    with Database(url) as db:
        check_rss_curve_columns(db, vid)


def test_traces_and_their_contents(pg, tmp_path):
    f = tmp_path / "t.trace"
    f.write_bytes(bytes(range(256)) * 40000)            # ~10 MB: three pieces
    sha = sha256(f)
    with Database(pg.url) as db:
        assert db.shared
        tid = db.add_trace(f, sha, command="app", events=3, size_bytes=f.stat().st_size,
                           stats={"events": 3}, invocation={"argv": ["./app"], "cwd": "/w",
                                                             "stdin": None})
        assert db.add_trace(f, sha) == tid                 # idempotent by content
        assert db.has_trace_data(sha)
        with open(tmp_path / "copy", "wb") as out:
            assert db.read_trace_data(sha, out)
        assert (tmp_path / "copy").read_bytes() == f.read_bytes()
        assert db.invocation(db.trace(tid))["argv"] == ["./app"]
        assert db.trace(tid)[0] == tid                     # rows by position too
        m = db.add_measurement(tid, "glibc", None, "time", 1, {"ops": 1})
        assert [r["id"] for r in db.measurements(trace_id=tid, allocator="glibc")] == [m]
        assert len(db.query("SELECT * FROM hc_baselines")) >= 1
        db.add_study("s1", "mem", [tid], "x")
        db.add_study("s2", "perf", [tid], "x")
        db.add_study("s1", "perf", [tid], "y")              # ignored: the name exists
        assert db.latest_study()["name"] == "s2" and db.study("s1")["objective"] == "mem"
        db.add_build("k", "QL_HIGH=8", "/lib.so")
        db.add_build("k", "QL_HIGH=16", "/lib.so")
        assert db.build("k")["setting"] == "QL_HIGH=16"
        vid = db.add_validation("s1", "perf", ["./app"], "/w", None, 3)
        db.add_real_run(vid, {"candidate": "glibc", "allocator": "glibc", "round": 0,
                              "wall_s": 0.123456789, "peak_rss_bytes": 5 << 30,
                              "exit_status": 0})
        run = db.real_runs(vid)[0]
        assert run["wall_s"] == pytest.approx(0.123456789, rel=1e-12)   # not a 4-byte float
        assert run["peak_rss_bytes"] == 5 << 30                          # not a 32-bit integer
        with pytest.raises(RuntimeError):
            with db.transaction() as c:
                c.execute("INSERT INTO hc_studies (name, objective, trace_ids, storage,"
                          " created) VALUES ('s3', 'mem', '[]', 'x', 'now')")
                raise RuntimeError("crash mid-write")
        assert db.study("s3") is None


def test_queue_claims_are_row_locks(pg):
    with Database(pg.url) as db:
        db.query("DELETE FROM hc_queue")
        a = jobs.enqueue(db, "qa", [1], {})
        b = jobs.enqueue(db, "qb", [1], {})
        with pytest.raises(HctuneError, match="already queued"):
            jobs.enqueue(db, "qa", [1], {})
    # one worker holds its claim transaction open on the first queued row: another worker
    # skips that row rather than waiting for it
    holder = Database(pg.url)
    taken, release, other = threading.Event(), threading.Event(), []
    try:
        def hold():
            with holder.transaction() as c:
                c.execute("SELECT id FROM hc_queue WHERE id = :id FOR UPDATE", id=a)
                taken.set()
                release.wait(30)
        th = threading.Thread(target=hold)
        th.start()
        assert taken.wait(30)
        with Database(pg.url) as db:
            other.append(jobs.claim(db))
        release.set()
        th.join(30)
    finally:
        holder.close()
    assert other[0]["id"] == b and other[0]["state"] == "running"
    with Database(pg.url) as db:
        assert jobs.claim(db)["id"] == a                       # free again: the oldest queued
        assert jobs.start_comparing(db, a) and not jobs.start_comparing(db, a)
        jobs.finish(db, a)
        assert jobs.job(db, "qa")["state"] == "done"


def test_a_schema_4_database_gains_workers_and_sessions(pg, monkeypatch):
    from hctune import db as _db
    from test_core_db import upgraded_keeps_the_queue_and_has_workers
    pg._run(str(pg.bin / "createdb"), "-h", "127.0.0.1", "-p", str(pg.port), "-U", "hctune",
            "four")
    url = pg.url.rsplit("/", 1)[0] + "/four"
    monkeypatch.setattr(_db.schema, "SCHEMA_VERSION", 4)
    with Database(url) as db:
        jobs.enqueue(db, "old", [1], {})
    monkeypatch.undo()
    _db._checked.discard(url)      # as a process started after the upgrade of hctune
    upgraded_keeps_the_queue_and_has_workers(Database(url))


def test_bad_url_is_one_line(tmp_path):
    with pytest.raises(HctuneError, match="cannot open database postgresql://u:\\*\\*\\*@"):
        Database("postgresql://u:secret@127.0.0.1:1/x")
    with pytest.raises(HctuneError, match="use a SQLite file or postgresql"):
        Database("mysql://u@h/x")
