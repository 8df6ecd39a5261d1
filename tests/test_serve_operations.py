"""`hctune serve` run by a team: local workers restarted when they die, a queued study that says
what it waits for, and studies `hctune search` ran in the same database listed beside the
service's own."""

import os
import signal
import time
from pathlib import Path

import pytest

from hctune.db import Database
from hctune.search.storage import default_url
from serve_support import Served

pytestmark = pytest.mark.timeout(120)


def children(pid: int) -> set[int]:
    """The live child processes of `pid` (of any of its threads)."""
    out = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            out |= {int(c) for c in (task / "children").read_text().split()}
        except FileNotFoundError:
            pass
    return out


def test_a_killed_local_worker_is_restarted(tmp_path):
    srv = Served(tmp_path / "h.db", "--workers", 1)
    try:
        deadline = time.time() + 30
        while not children(srv.proc.pid) and time.time() < deadline:
            time.sleep(0.2)
        (first,) = children(srv.proc.pid)
        os.kill(first, signal.SIGKILL)
        deadline = time.time() + 30
        while time.time() < deadline:
            now = children(srv.proc.pid) - {first}
            if now:
                break
            time.sleep(0.2)
        assert now, srv.output()
        assert f"worker {first} exited (-9); starting another" in srv.output()
    finally:
        srv.stop()


def test_queued_says_why_and_cli_studies_are_listed(tmp_path):
    db = tmp_path / "h.db"
    Database(db).close()
    trace = tmp_path / "t.trace"
    trace.write_bytes(b"x")
    with Database(db) as d:
        tid = d.add_trace(trace, "ab" * 32, command="app", events=1)
        d.add_study("from-the-cli", "perf", [tid], default_url(db), {"metric": "time"})
    srv = Served(db)          # no local workers
    try:
        status, lst = srv.request("GET", "/api/studies")
        assert status == 200 and [s["name"] for s in lst] == ["from-the-cli"], lst
        assert lst[0]["state"] == "cli" and lst[0]["options"]["objective"] == "perf"
        assert srv.request("GET", "/api/studies/from-the-cli")[0] == 200
        status, page = srv.request("GET", "/studies")
        assert b"from-the-cli" in page
        status, s = srv.request("POST", "/api/studies", {"traces": [tid], "name": "web"})
        assert status == 201, s
        assert "runs none" in s["note"] and "hctune --db DB worker" in s["note"]
        status, page = srv.request("GET", "/studies/web")
        assert status == 200 and b"waiting for a worker" in page
    finally:
        srv.stop()


def test_cancel_and_delete_studies_and_traces(tmp_path):
    db = tmp_path / "h.db"
    Database(db).close()
    trace = tmp_path / "t.trace"
    trace.write_bytes(b"x")
    with Database(db) as d:
        tid = d.add_trace(trace, "cd" * 32, command="app", events=1)
    srv = Served(db)
    try:
        assert srv.request("POST", "/api/studies", {"traces": [tid], "name": "s"})[0] == 201
        assert srv.request("DELETE", f"/api/traces/{tid}")[0] == 409     # a study uses it
        status, c = srv.request("POST", "/api/studies/s/cancel")
        assert status == 200 and c["state"] == "cancelled", c
        assert srv.request("GET", "/api/studies/s")[1]["state"] == "cancelled"
        assert srv.request("POST", "/api/studies/s/cancel")[0] == 409     # once
        # a study that never started has nothing to emit, and says so without naming others
        assert srv.request("POST", "/api/studies", {"traces": [tid], "name": "q"})[0] == 201
        status, err = srv.request("GET", "/api/studies/q/emit/malloc.c")
        assert status == 409 and "not started" in err["error"] and "from" not in err["error"]
        assert srv.request("DELETE", "/api/studies/q")[0] == 200
        status, d = srv.request("DELETE", "/api/studies/s")
        assert status == 200 and d["deleted"]["queue"] == 1 and "traces" in d["kept"], d
        assert srv.request("GET", "/api/studies/s")[0] == 404
        status, d = srv.request("DELETE", f"/api/traces/{tid}")
        assert status == 200 and d["deleted"]["file"] is False, d   # not the server's file
        assert trace.exists() and srv.request("GET", "/api/traces")[1] == []
        # the buttons, and their requests carry the header the CSRF rule asks for
        assert srv.request("POST", "/api/studies", {"traces": [1], "name": "t"})[0] == 404
        page = srv.request("GET", "/traces")[1]
        assert b"X-Requested-With" in page
    finally:
        srv.stop()


def test_the_views_optuna_draws(tmp_path):
    import optuna
    from optuna.distributions import FloatDistribution, IntDistribution
    db = tmp_path / "h.db"
    Database(db).close()
    url = default_url(db)
    st = optuna.create_study(study_name="v", storage=url)
    dist = {"ql": IntDistribution(16, 512), "frac": FloatDistribution(0, 1)}
    for i in range(12):
        p = {"ql": 16 + 40 * i, "frac": (i * 7 % 10) / 10}
        mem = 1 + abs(p["frac"] - 0.3) + p["ql"] / 5000
        st.add_trial(optuna.trial.create_trial(params=p, distributions=dist, value=mem,
                                               user_attrs={"mem": mem, "perf": 1.0}))
    with Database(db) as d:
        d.add_study("v", "mem", [1], url, {"metric": "time"})
    srv = Served(db)
    try:
        for kind in ("history", "importance", "parallel"):
            status, svg = srv.request("GET", f"/api/studies/v/views/{kind}.svg")
            assert status == 200 and svg.startswith(b"<svg"), (kind, status, svg)
        assert srv.request("GET", "/api/studies/v/views/nope.svg")[0] == 404
        assert b"views/history.svg" in srv.request("GET", "/studies/v")[1]
    finally:
        srv.stop()
