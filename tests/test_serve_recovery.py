"""A worker killed in the middle of a trial: its trial is failed, naming the dead process, and
queued once more with the same parameters; the study still reaches its trial count and no
finished trial is lost. On one machine a sibling worker sees the dead pid after its own next
trial (fail_orphans); a worker on another machine is only seen silent by its heartbeat, whose
durations the environment shortens here (HCTUNE_HEARTBEAT_SECONDS, HCTUNE_GRACE_SECONDS)."""

import signal
import socket
import time
import warnings

import optuna
import pytest
from optuna.distributions import FloatDistribution, IntDistribution

import gate
from hctune.errors import HctuneError
from hctune.search.storage import default_url, fail_orphans, open_storage
from search_support import hctune, need_hc
from serve_support import Served, stop_workers, worker

pytestmark = pytest.mark.timeout(240)

# The paper's 16 seeds are queued first and a retry waits behind them (Optuna takes waiting
# trials in order): 18 finished trials run the retry of a seed killed early.
TRIALS = 18


def trials_by_number(url, name):
    return {t.number: t for t in optuna.load_study(study_name=name, storage=url).trials}


def serve_a_study(app, tmp_path, n: int, study: dict) -> Served:
    """`hctune serve` on a new database with one study queued on a trace of validate_app run
    with argument n (~2.5 n events), uploaded; the caller stops the server."""
    hctune(tmp_path / "profile.db", "profile", "-o", tmp_path / "app.hct", app, str(n),
           cwd=tmp_path)
    srv = Served(tmp_path / "hctune.db")
    try:
        status, t = srv.upload((tmp_path / "app.hct").read_bytes())
        assert status == 201, t
        status, s = srv.request("POST", "/api/studies", {"traces": [t["id"]], "allocators": ["hc"],
                                                  **study})
        assert status == 201, s
    except BaseException:
        srv.stop()
        raise
    return srv


def test_a_killed_workers_trial_is_failed_and_retried(c_program, tmp_path):
    need_hc()
    srv = serve_a_study(c_program("validate_app"), tmp_path, 50000, {
        "trials": TRIALS, "name": "kill", "compare_rounds": 0, "repeat": 3, "seed": 3})
    db = tmp_path / "hctune.db"
    url = default_url(db)
    procs = []
    try:
        # worker 0 runs the first trial alone until worker 1 is in one too (the seeds are
        # queued by then: worker 1 joins the study worker 0 made), and is caught mid-measurement
        # in its second (tests/gate.py): it has finished one trial when the kill lands
        meet, caught = (tmp_path / "meet", 2), tmp_path / "worker0.caught"
        procs.append(worker(db, log=tmp_path / "worker0.log",
                            env=gate.env(meet=meet, hang=("trial:2", caught))))
        gate.wait_for(meet[0] / str(procs[0].pid), procs[0], what="worker 0's first trial")
        procs.append(worker(db, log=tmp_path / "worker1.log", env=gate.env(meet=meet)))
        gate.wait_for(caught, *procs, what="worker 0 in its second trial")
        by = trials_by_number(url, "kill")
        victim, = [x for x in by.values() if x.state.name == "RUNNING"
                   and x.user_attrs.get("worker") == f"{socket.gethostname()}:{procs[0].pid}"]
        p = procs[0]
        p.send_signal(signal.SIGKILL)
        p.wait()
        kept = {n for n, x in by.items() if x.state.name == "COMPLETE"}
        assert kept, "worker 0 finished no trial before its second"
        s = srv.wait_study("kill", timeout=150)
        assert s["state"] == "done", (s, srv.output())
        by = trials_by_number(url, "kill")
        dead = by[victim.number]
        assert dead.state.name == "FAIL"
        assert f"{socket.gethostname()}:{p.pid}:" in dead.user_attrs["error"]
        assert "was killed" in dead.user_attrs["error"]
        retries = [x for x in by.values() if x.user_attrs.get("retry_of") == victim.number]
        assert len(retries) == 1, [(x.number, x.state, x.user_attrs) for x in by.values()]
        # the same parameters (the victim may have been read while it still drew some)
        assert dead.params.items() <= retries[0].params.items()
        assert victim.params.items() <= retries[0].params.items()
        if "setting" in dead.user_attrs:
            assert retries[0].user_attrs["setting"] == dead.user_attrs["setting"]
        assert retries[0].state.name == "COMPLETE"
        shown = {t["number"]: t for t in s["trials"]}                # and the API says so
        assert shown[retries[0].number]["retry_of"] == victim.number
        assert shown[victim.number]["state"] == "fail" and shown[victim.number]["error"]
        done = {n for n, x in by.items() if x.state.name == "COMPLETE"}
        # the study's count is what the search counts (search.study.accounting): finished,
        # pruned once they had lost to the best, and failed (the victim)
        lost = {n for n, x in by.items() if x.state.name == "PRUNED"
                and not {"skipped", "stopped"} & set(x.user_attrs)}
        failed = {n for n, x in by.items() if x.state.name == "FAIL"}
        assert len(done | lost | failed) >= TRIALS and kept <= done   # none of the finished lost
        assert not [x for x in by.values() if x.state.name == "RUNNING"]
    finally:
        stop_workers(procs)
        srv.stop()


def test_a_silent_worker_elsewhere_is_failed_by_the_heartbeat(tmp_path, monkeypatch):
    """A trial owned by a process on another machine is never judged by pid; once its heartbeat
    is older than the grace period, a worker's check between trials (fail_orphans) fails it with
    an error naming it, or Optuna's own check before a trial does (the storage's callback), and
    either way it is queued again the same way."""
    monkeypatch.setenv("HCTUNE_HEARTBEAT_SECONDS", "1")
    monkeypatch.setenv("HCTUNE_GRACE_SECONDS", "2")
    url = default_url(tmp_path / "hb.db")
    far = open_storage(url, owner="another-machine:4242:1")
    assert (far.heartbeat_interval, far.grace_period) == (1, 2)
    lost, beat = {}, None
    for name in ("ours", "optunas"):
        study = optuna.create_study(study_name=name, storage=far)
        with warnings.catch_warnings():  # Optuna: heartbeats are "supposed to be used with
            warnings.simplefilter("ignore")  # optimize"
            lost[name] = study.ask({"x": FloatDistribution(0, 1), "n": IntDistribution(1, 9)})
        beat = beat or time.monotonic()
        far.record_heartbeat(lost[name]._trial_id)          # beat once, then fell silent
    # not while the beat is fresh (judged with an hour's grace: a loaded machine can take
    # 2 s to get here)
    monkeypatch.setenv("HCTUNE_GRACE_SECONDS", "3600")
    patient = optuna.load_study(study_name="ours", storage=open_storage(url, owner="y:1:1"))
    assert fail_orphans(patient._storage, patient._study_id) == []
    monkeypatch.setenv("HCTUNE_GRACE_SECONDS", "2")
    here = open_storage(url, owner="x:1:1")
    studies = {n: optuna.load_study(study_name=n, storage=here) for n in lost}
    # (SQLite keeps the heartbeat to the second: the grace period is over 1-2 s after the beat)
    guard = time.monotonic() + 120
    while not fail_orphans(studies["ours"]._storage, studies["ours"]._study_id):
        assert time.monotonic() < guard, "the silent trial was never failed"
        time.sleep(0.25)
    assert time.monotonic() - beat >= 1.0          # not before the grace period
    # what study.optimize does before each trial (the second beat may have fallen in the next
    # second: it goes stale up to a second later)
    while studies["optunas"].trials[lost["optunas"].number].state.name == "RUNNING":
        assert time.monotonic() < guard, "Optuna never failed the silent trial"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            optuna.storages.fail_stale_trials(studies["optunas"])
        time.sleep(0.1)
    for name, st in studies.items():
        by = {t.number: t for t in st.get_trials()}
        dead = by[lost[name].number]
        assert dead.state.name == "FAIL", name
        if name == "ours":
            assert dead.user_attrs["error"] == ("its process (another-machine:4242:1) sent no "
                                                "heartbeat for more than 2 s")
        retry = [t for t in by.values() if t.user_attrs.get("retry_of") == dead.number]
        assert len(retry) == 1 and retry[0].state.name == "WAITING", name
        assert retry[0].system_attrs["fixed_params"] == dead.params     # the same values
        assert retry[0].system_attrs["retry_history"] == [dead.number]  # never retried twice

    monkeypatch.setenv("HCTUNE_GRACE_SECONDS", "1")
    with pytest.raises(HctuneError, match="must be longer than the heartbeat"):
        open_storage(url)
    monkeypatch.setenv("HCTUNE_GRACE_SECONDS", "soon")
    with pytest.raises(HctuneError, match="whole number of seconds"):
        open_storage(url)


def test_a_study_left_comparing_by_a_dead_worker_is_finished_by_another(c_program, tmp_path):
    """The worker that closes a study (measuring the other allocators, validating) dies there:
    the next worker on the machine sees its pid gone, puts the study back to running and
    finishes it (one on another machine would once its beat is older than the grace period:
    tests/test_core_db.py)."""
    need_hc()
    srv = serve_a_study(c_program("validate_app"), tmp_path, 50000, {
        "trials": 2, "name": "closing", "compare_rounds": 20})
    db = tmp_path / "hctune.db"
    procs = []
    try:
        caught = tmp_path / "worker0.caught"     # caught comparing (tests/gate.py)
        procs.append(worker(db, log=tmp_path / "worker0.log",
                            env=gate.env(hang=("compare", caught))))
        gate.wait_for(caught, procs[0], what="worker 0 comparing")
        procs[0].send_signal(signal.SIGKILL)
        procs[0].wait()
        assert srv.request("GET", "/api/studies/closing")[1]["state"] == "comparing"
        procs.append(worker(db, log=tmp_path / "worker1.log"))
        s = srv.wait_study("closing", timeout=150)
        assert s["state"] == "done", s
        assert "left unfinished by a dead worker" in (tmp_path / "worker1.log").read_text()
        assert any(len(c["allocators"]) > 1 for c in s["comparison"] or []), s["comparison"]
    finally:
        stop_workers(procs)
        srv.stop()
