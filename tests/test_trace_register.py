"""hctune.trace.register: one registration whichever way a trace enters — profiled or imported
(`register`), or a file named to replay, compare or search (`named`) — with the same columns
(events, command, statistics), and one "no trace named: the latest"."""

from __future__ import annotations

import json

import pytest

from hctune.db import Database
from hctune.errors import HctuneError
from hctune.files import sha256
from hctune.search import study as _study
from hctune.trace import register
from hctune.trace.writer import Writer


def _trace(path, n=20):
    with Writer(path, command="churn 3") as w:
        for i in range(n):
            w.malloc(0x1000 + 64 * i, 16 + i)
        for i in range(n):
            w.free(0x1000 + 64 * i)
    return path


def test_a_named_trace_is_stored_with_its_statistics_like_a_profiled_one(tmp_path):
    a, b = _trace(tmp_path / "a.trace"), _trace(tmp_path / "b.trace", 30)
    with Database(tmp_path / "h.db") as db:
        tid, st = register.register(db, a, "preload")
        row_a = db.trace(tid)
        row_b = register.named(db, b)
        for row, n in ((row_a, 40), (row_b, 60)):
            assert row["events"] == n and row["command"] == "churn 3"
            assert json.loads(row["stats_json"])["events"] == n
        assert register.named(db, b)["id"] == row_b["id"]        # idempotent
        assert _study.register_trace(db, b).id == row_b["id"]    # search's entry is the same
        assert register.latest(db)["id"] == row_b["id"]


def test_a_registered_trace_without_statistics_gets_them_when_named(tmp_path):
    a = _trace(tmp_path / "a.trace")
    with Database(tmp_path / "h.db") as db:
        tid = db.add_trace(a, sha256(a), command="churn 3", events=40, size_bytes=a.stat().st_size)
        assert db.trace(tid)["stats_json"] is None
        assert json.loads(register.named(db, a)["stats_json"])["events"] == 40


def test_bad_names_and_no_trace_are_one_line_errors(tmp_path):
    (tmp_path / "empty.trace").write_bytes(b"")
    with Database(tmp_path / "h.db") as db:
        with pytest.raises(HctuneError, match="no trace given"):
            register.latest(db)
        for name, message in (("gone.trace", "does not exist"), ("empty.trace", "is empty"),
                              (".", "is a directory")):
            with pytest.raises(HctuneError, match=message):
                register.named(db, tmp_path / name)
        gone = _trace(tmp_path / "gone2.trace")
        register.named(db, gone)
        gone.unlink()
        with pytest.raises(HctuneError, match="no longer exists"):
            register.latest(db)
