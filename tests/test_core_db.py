"""hctune's own tables: schema versioning, idempotent trace registration, transactions."""

import sqlite3

import pytest

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
        assert len(db.conn.execute("SELECT * FROM hc_baselines").fetchall()) == 1


def test_reopen_keeps_data_and_version(tmp_path):
    path = tmp_path / "r.db"
    with Database(path) as db:
        db.add_study("s", "mem", [1], "sqlite:///x")
    with Database(path) as db:
        assert db.study("s")["objective"] == "mem"
        assert db.conn.execute("SELECT version FROM hc_schema").fetchone()[0] == SCHEMA_VERSION


def test_newer_schema_is_refused(tmp_path):
    path = tmp_path / "r.db"
    Database(path).close()
    c = sqlite3.connect(path)
    c.execute("UPDATE hc_schema SET version = 999")
    c.commit()
    c.close()
    with pytest.raises(HctuneError, match="newer"):
        Database(path)


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
