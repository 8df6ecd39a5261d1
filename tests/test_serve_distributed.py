"""Several `hctune worker` processes on one PostgreSQL storage split one study that `hctune
serve` queued; killing one in the middle of a trial loses none of its finished trials and the
study still finishes."""

import signal
import socket
import time

import optuna
import pytest

from search_support import Postgres, need_hc, record_gawk_trace
from serve_support import Served, worker

pytestmark = pytest.mark.timeout(240)

TRIALS = 24


def test_two_workers_split_a_study_and_survive_a_kill(tmp_path):
    need_hc()
    trace = record_gawk_trace(tmp_path / "gawk.trace")
    pg = Postgres(tmp_path).start()
    db = tmp_path / "hctune.db"
    srv = Served(db, "--storage", pg.url)
    procs = []
    try:
        status, t = srv.upload(trace.read_bytes())
        assert status == 201, t
        status, s = srv.request("POST", "/api/studies", {"traces": [t["id"]], "trials": TRIALS,
                                                         "name": "split", "compare_rounds": 0,
                                                         "repeat": 3})
        assert status == 201, s
        procs = [worker(db, "--storage", pg.url, log=tmp_path / f"worker{i}.log")
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
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
                p.wait(timeout=30)
        srv.stop()
        pg.stop()
