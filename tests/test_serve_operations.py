"""`hctune serve` run by a team: the workers page and API (local workers restarted when they die,
dead ones shown and then forgotten), a queued study that says what it waits for, and studies
`hctune search` ran in the same database listed beside the service's own."""

import datetime
import os
import signal
import time
from pathlib import Path

import pytest

from hctune import jobs
from hctune.db import Database
from hctune.search import study as _study
from hctune.search.storage import default_url
from hctune.jobs import runner as _worker
from serve_support import Served, stop_workers, worker

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
        deadline = time.time() + 120
        while not children(srv.proc.pid) and time.time() < deadline:
            time.sleep(0.2)
        (first,) = children(srv.proc.pid)
        os.kill(first, signal.SIGKILL)
        deadline = time.time() + 120
        while time.time() < deadline:
            now = children(srv.proc.pid) - {first}
            if now:
                break
            time.sleep(0.2)
        assert now, srv.output()
        assert f"worker {first} exited (-9); starting another" in srv.output()
    finally:
        srv.stop()


def _until(srv, check, what, timeout=120):
    """The workers list once check(list) holds."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        status, ws = srv.request("GET", "/api/workers")
        assert status == 200, ws
        if check(ws):
            return ws
        time.sleep(0.3)
    raise AssertionError(f"{what}: {ws}\n{srv.output()}")


def test_the_workers_page_and_api(tmp_path):
    """Every worker beats into the database: a local one, one started by hand (as on another
    machine), one elsewhere that fell silent (dead), one silent for hours (forgotten)."""
    db = tmp_path / "h.db"
    with Database(db) as d:
        for wid, host, age in (("far:7:1", "far", 40), ("old:8:1", "old", 7200)):
            jobs.worker_beat(d, wid, host, 7, "2026-01-01T00:00:00+00:00", "running", "s", 3)
            beat = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(seconds=age)
            d.query("UPDATE hc_workers SET beat = :b WHERE id = :id", id=wid,
                    b=beat.isoformat(timespec="seconds"))
    srv = Served(db, "--workers", 1)
    other = []
    try:
        ws = _until(srv, lambda ws: any(w["local"] and w["alive"] for w in ws), "no local worker")
        (local,) = [w for w in ws if w["local"]]
        assert local["state"] == "idle" and local["pid"] in children(srv.proc.pid)
        assert "old:8:1" not in {w["id"] for w in ws}                   # forgotten
        (far,) = [w for w in ws if w["id"] == "far:7:1"]
        assert far["state"] == "dead" and not far["alive"] and far["study"] is None
        assert far["last_study"] == "s"
        other.append(worker(db, log=tmp_path / "w.log"))
        ws = _until(srv, lambda ws: any(w["pid"] == other[0].pid and w["alive"] for w in ws),
                    "the hand-started worker")
        assert not [w for w in ws if w["pid"] == other[0].pid][0]["local"]
        os.kill(local["pid"], signal.SIGKILL)
        ws = _until(srv, lambda ws: any(w["pid"] == local["pid"] and w["state"] == "dead"
                                        for w in ws) and
                    any(w["local"] and w["alive"] and w["pid"] != local["pid"] for w in ws),
                    "the killed worker dead, another started")
        other[0].terminate()
        other[0].wait(30)
        _until(srv, lambda ws: any(w["pid"] == other[0].pid and w["state"] == "stopped"
                                   for w in ws), "the stopped worker")
        status, page = srv.request("GET", "/workers")
        assert status == 200 and b"<strong>dead</strong>" in page and b"stopped" in page
        assert str(local["pid"]).encode() in page
        status, spec = srv.request("GET", "/openapi.json")
        assert "/api/workers" in spec["paths"]
    finally:
        stop_workers(other)
        srv.stop()


def _a_database_with_a_trace(tmp_path):
    """(database, trace id): a new database holding one stand-in trace (its file exists)."""
    db = tmp_path / "h.db"
    trace = tmp_path / "t.trace"
    trace.write_bytes(b"x")
    with Database(db) as d:
        return db, d.add_trace(trace, "ab" * 32, command="app", events=1)


def test_queued_says_why_and_cli_studies_are_listed(tmp_path):
    db, tid = _a_database_with_a_trace(tmp_path)
    with Database(db) as d:
        d.add_study("from-the-cli", "perf", [tid], default_url(db), {"metric": "time"})
    srv = Served(db)          # no local workers
    try:
        status, lst = srv.request("GET", "/api/studies")
        assert status == 200 and [s["name"] for s in lst] == ["from-the-cli"], lst
        assert lst[0]["state"] == "done" and lst[0]["by"] == "cli"
        assert lst[0]["options"]["objective"] == "perf"
        assert srv.request("GET", "/api/studies/from-the-cli")[0] == 200
        status, page = srv.request("GET", "/studies")
        assert b"from-the-cli" in page
        status, s = srv.request("POST", "/api/studies", {"traces": [tid], "name": "web"})
        assert status == 201, s
        assert "none is alive" in s["note"] and "hctune --db DB worker" in s["note"]
        status, page = srv.request("GET", "/studies/web")
        assert status == 200 and b"waiting for a worker" in page
    finally:
        srv.stop()


def test_a_study_stored_without_allocators_stays_hc(tmp_path):
    """Studies stored before the default became every allocator installed (queued, or run by
    `hctune search`) have no `allocators` in their options: they were HC studies and stay so;
    a new study that names none gets the default, which the worker expands on its machine."""
    db, tid = _a_database_with_a_trace(tmp_path)
    with Database(db) as d:
        d.add_study("old-cli", "mem", [tid], default_url(db), {"metric": "time"})
        jobs.enqueue(d, "old-queued", [tid], {"objective": "mem", "trials": 5})
    srv = Served(db)          # no local workers
    try:
        for name in ("old-cli", "old-queued"):
            status, s = srv.request("GET", f"/api/studies/{name}?trials=false")
            assert status == 200 and s["options"]["allocators"] == ["hc"], s
        status, s = srv.request("POST", "/api/studies", {"traces": [tid], "name": "new"})
        assert status == 201 and s["options"]["allocators"] == ["installed"], s
        # no worker has expanded "installed" yet: the page says what it will be; mem is the
        # peak RSS of a search across allocators, the footprint of an HC one
        status, page = srv.request("GET", "/studies/new")
        assert b"installed (HC and every one installed on the machine of the worker" in page
        assert b"memory: peak RSS in the replay" in page
        assert srv.request("GET", "/api/studies/new")[1]["allocators_searched"] is None
        assert srv.request("GET", "/api/studies/old-cli")[1]["allocators_searched"] == ["hc"]
        assert b"memory: footprint in the replay" in srv.request("GET", "/studies/old-cli")[1]
        spec = srv.request("GET", "/openapi.json")[1]
        assert spec["components"]["schemas"]["StudyRequest"]["properties"]["allocators"][
            "default"] == ["installed"]
        # the form offers the default chosen, the single allocators as the alternative
        status, page = srv.request("GET", "/studies")
        assert b'name="allocators_from" value="installed" checked' in page, page
        assert b'value="hc" checked' not in page
        form = {"Content-Type": "application/x-www-form-urlencoded"}
        status, page = srv.request("POST", "/studies", f"traces={tid}&trials=2"
                                   "&allocators_from=ticked".encode(), form)
        assert status == 422 and b"tick at least one" in page
        assert b'value="ticked" checked' in page
        status, page = srv.request("POST", "/studies", f"traces={tid}&trials=2&allocators=hc"
                                   "&allocators_from=installed".encode(), form)
        assert status == 200, page          # the new study's page
        made = [s for s in srv.request("GET", "/api/studies")[1]
                if s["name"].startswith("web-")]
        assert [s["options"]["allocators"] for s in made] == [["installed"]], made
    finally:
        srv.stop()
    with Database(db) as d:
        old, new = jobs.job(d, "old-queued"), jobs.job(d, "new")
    assert _worker.options_of(old, None).allocators == ("hc",)
    assert _worker.options_of(new, None).allocators == _study.default_allocators()


def test_cancel_and_delete_studies_and_traces(tmp_path):
    db, tid = _a_database_with_a_trace(tmp_path)
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
        assert (tmp_path / "t.trace").exists() and srv.request("GET", "/api/traces")[1] == []
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
