"""The service on a PostgreSQL server, as on several machines: `hctune serve` and two `hctune
worker` processes share nothing but the database (hctune's tables, the queue, the uploaded
trace's contents and Optuna's trials are all in it; each worker has its own cache directory and
the server's copy of the trace is gone). They split one study; killing one in the middle of a
trial loses none of its finished trials and the study still finishes; the CLI reads the same
database."""

import os
import signal
import socket
import subprocess
import sys
import time

import optuna
import pytest

import gate
from search_support import Postgres, need_hc, record_gawk_trace
from serve_support import Served, compiles, stop_workers, worker

pytestmark = pytest.mark.timeout(240)

TRIALS = 10   # worker 0 is caught in its second trial: a few more are plenty


def _own_env() -> dict:
    """The environment without HCTUNE_CACHE, which would give both "machines" one cache."""
    return {k: v for k, v in os.environ.items() if k != "HCTUNE_CACHE"}


def test_two_workers_split_a_study_and_survive_a_kill(tmp_path):
    need_hc()
    trace = record_gawk_trace(tmp_path / "gawk.trace")
    pg = Postgres(tmp_path).start()
    server = tmp_path / "server"
    server.mkdir()
    srv = Served(pg.url, "--data-dir", server / "data", log_dir=server)
    procs = []
    try:
        status, t = srv.upload(trace.read_bytes())
        assert status == 201, t
        for f in (server / "data" / "traces").iterdir():   # not on any worker's disk
            f.unlink()
        status, s = srv.request("POST", "/api/studies", {"traces": [t["id"]], "trials": TRIALS,
                                                         "name": "split", "compare_rounds": 0,
                                                         "repeat": 3, "allocators": ["hc"]})
        assert status == 201, s
        # both take a trial of the study at once (each runs trials); worker 0 is caught in
        # its second, mid-measurement: the kill lands while it is RUNNING (tests/gate.py)
        meet = (tmp_path / "meet", 2)
        caught = tmp_path / "worker0.caught"
        procs = [worker(pg.url, log=tmp_path / f"worker{i}.log", env=gate.env(
                     {**_own_env(), "XDG_CACHE_HOME": str(tmp_path / f"machine{i}")}, meet=meet,
                     hang=("trial:2", caught) if i == 0 else None)) for i in range(2)]
        ids = {f"{socket.gethostname()}:{p.pid}": p for p in procs}
        victim = f"{socket.gethostname()}:{procs[0].pid}"
        gate.wait_for(caught, *procs, what="worker 0 in its second trial")
        procs[0].send_signal(signal.SIGKILL)
        procs[0].wait()
        st = optuna.load_study(study_name="split", storage=pg.url)
        victim_done = [x.number for x in st.get_trials(deepcopy=False)
                       if x.user_attrs.get("worker") == victim and x.state.name == "COMPLETE"]
        assert victim_done, "the victim finished no trial before its second"
        s = srv.wait_study("split", timeout=150)
        assert s["state"] == "done", s
        done = [x for x in s["trials"] if x["state"] == "complete"]
        # --trials counts trials evaluated: finished, or pruned once they had lost (a replay
        # past the best's peak RSS, search/study.py)
        lost = [x for x in s["trials"] if x["state"] == "pruned"]
        assert len(done) + len(lost) >= TRIALS
        assert {x["worker"] for x in done} == set(ids)        # both workers' trials are there
        assert set(victim_done) <= {x["number"] for x in done}  # none of the victim's lost
        assert len({x["number"] for x in done}) == len(done)
        for i in range(2):   # each "machine" read the trace from the database
            copy = tmp_path / f"machine{i}" / "hctune" / "traces" / f"{t['sha256']}.trace"
            assert copy.read_bytes() == trace.read_bytes()
        assert not list(tmp_path.glob("**/*.db"))             # no SQLite file anywhere

        # the CLI on the same database, side by side with the service
        out = tmp_path / "cli"
        out.mkdir()
        r = subprocess.run([sys.executable, "-m", "hctune", "--db", pg.url, "emit", "--study",
                            "split", "-o", str(out / "malloc.c")], capture_output=True,
                           text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        compiles((out / "malloc.c").read_bytes(), out)
    finally:
        stop_workers(procs)
        srv.stop()
        pg.stop()


def test_a_worker_waits_out_a_database_restart(tmp_path):
    """The PostgreSQL server goes away under an idle worker: the worker says so in one line,
    waits longer each time (here up to 2 s: HCTUNE_WORKER_MAX_WAIT_SECONDS) and tries again,
    and takes work once the server is back, instead of dying. The test waits on what the
    worker says and does; its deadlines only guard against a hang."""
    from hctune import jobs
    from hctune.db import Database
    pg = Postgres(tmp_path).start()
    Database(pg.url).close()
    log = tmp_path / "worker.log"
    w = worker(pg.url, log=log, env={**os.environ, "HCTUNE_WORKER_MAX_WAIT_SECONDS": "2"})

    def until(done, what):
        deadline = time.time() + 120
        while not done():
            assert w.poll() is None, f"the worker ended before {what}:\n{log.read_text()}"
            assert time.time() < deadline, f"no {what} in 120 s:\n{log.read_text()}"
            time.sleep(0.1)

    def registered():   # its first beat is in (its startup check of the storage is behind it)
        with Database(pg.url) as db:
            return any(r["pid"] == w.pid for r in jobs.workers(db))
    try:
        until(registered, "first beat")
        pg.stop(keep=True)
        # twice unreachable: the wait doubled, and stops at the longest
        until(lambda: "trying again in 2 s" in log.read_text(), "second try")
        pg.restart()
        with Database(pg.url) as db:
            jobs.enqueue(db, "after", [99], {"trials": 1})     # no trace #99: it fails, at once

        def failed():
            with Database(pg.url) as db:
                return jobs.job(db, "after")["state"] == "failed"
        until(failed, "failed study")
        with Database(pg.url) as db:
            assert "trace #99" in jobs.job(db, "after")["error"]
        lines = log.read_text().splitlines()
        assert not [x for x in lines if "Traceback" in x]
        waits = [x for x in lines if "database unreachable" in x]
        assert "trying again in 1 s" in waits[0], waits
        assert not [x for x in waits if "in 4 s" in x], waits
    finally:
        w.terminate()
        w.wait(timeout=30)
        pg.stop()
