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

from search_support import Postgres, need_hc, record_gawk_trace
from serve_support import Served, compiles, stop_workers, worker

pytestmark = pytest.mark.timeout(240)

TRIALS = 24


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
        procs = [worker(pg.url, log=tmp_path / f"worker{i}.log",
                        env={**os.environ, "XDG_CACHE_HOME": str(tmp_path / f"machine{i}")})
                 for i in range(2)]
        ids = {f"{socket.gethostname()}:{p.pid}": p for p in procs}
        victim_done = []
        deadline = time.time() + 150
        while time.time() < deadline:   # both have finished trials; one of them is mid-trial
            # read straight from the storage: the API serves trials up to a second old
            try:
                st = optuna.load_study(study_name="split", storage=pg.url)
            except KeyError:   # not created yet
                time.sleep(0.2)
                continue
            by = {}
            for x in st.get_trials(deepcopy=False):
                by.setdefault((x.user_attrs.get("worker"), x.state.name.lower()),
                              []).append(x.number)
            busy = [w for w in ids if (w, "running") in by]
            if all((w, "complete") in by for w in ids) and busy:
                ids[busy[0]].send_signal(signal.SIGKILL)
                ids[busy[0]].wait()
                victim_done = by[(busy[0], "complete")]
                break
            if srv.request("GET", "/api/studies/split")[1]["state"] == "done":
                break
            time.sleep(0.05)
        assert victim_done, "the victim never ran a trial while the other worked"
        s = srv.wait_study("split", timeout=150)
        assert s["state"] == "done", s
        done = [x for x in s["trials"] if x["state"] == "complete"]
        assert len(done) >= TRIALS
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
    waits and tries again, and takes work once the server is back, instead of dying."""
    from hctune import jobs
    from hctune.db import Database
    pg = Postgres(tmp_path).start()
    Database(pg.url).close()
    w = worker(pg.url, log=tmp_path / "worker.log")
    try:
        # started: its first beat is in (its startup check of the storage is behind it)
        deadline = time.time() + 60
        while True:
            with Database(pg.url) as db:
                if any(r["pid"] == w.pid for r in jobs.workers(db)):
                    break
            assert time.time() < deadline and w.poll() is None, \
                (tmp_path / "worker.log").read_text()
            time.sleep(0.2)
        pg.stop()
        deadline = time.time() + 30
        while "database unreachable" not in (tmp_path / "worker.log").read_text():
            assert time.time() < deadline, (tmp_path / "worker.log").read_text()
            assert w.poll() is None, (tmp_path / "worker.log").read_text()
            time.sleep(0.2)
        pg.restart()
        with Database(pg.url) as db:
            jobs.enqueue(db, "after", [99], {"trials": 1})     # no trace #99: it fails, at once
        deadline = time.time() + 60
        while True:
            with Database(pg.url) as db:
                q = jobs.job(db, "after")
            if q["state"] == "failed":
                break
            assert time.time() < deadline and w.poll() is None, \
                (tmp_path / "worker.log").read_text()
            time.sleep(0.2)
        assert "trace #99" in q["error"]
        lines = (tmp_path / "worker.log").read_text().splitlines()
        assert not [x for x in lines if "Traceback" in x]
    finally:
        w.terminate()
        w.wait(timeout=30)
        pg.stop()
