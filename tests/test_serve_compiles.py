"""`GET /api/studies/NAME/emit/libhcmalloc.so?trial=N` compiles in one bounded pool through the
HC build cache, over HTTP on a real server: requests for new settings while the slot is busy
are 429 with Retry-After (counted: compiles started, by a compiler wrapper's log), a setting
in the build cache compiles nothing, and a server killed mid-compile leaves no temporary
directory once the next build runs. The compile is held by a gate file, not timed."""

import http.client
import os
import signal
import threading
import time

import optuna
import pytest
from optuna.distributions import IntDistribution
from optuna.trial import TrialState, create_trial

from hctune.db import Database
from hctune.search.storage import default_url, open_storage
from serve_support import Served

pytestmark = pytest.mark.timeout(180)

WRAPPER = """#!/bin/sh
case " $* " in *" --version "*) exec cc "$@";; esac
echo $$ >> "$CC_LOG"
touch "$CC_GATE.started"
while [ ! -e "$CC_GATE" ]; do sleep 0.05; done
exec cc "$@"
"""


def _study(tmp_path):
    db = tmp_path / "h.db"
    (tmp_path / "t.trace").write_bytes(b"x")
    with Database(db) as d:
        tid = d.add_trace(tmp_path / "t.trace", "ab" * 32, command="app", events=1)
        d.add_study("s", "mem", [tid], default_url(db), {"metric": "time"})
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    st = optuna.create_study(study_name="s", storage=open_storage(default_url(db)))
    # trial 5 measured the setting of trial 0 again (a retry)
    ql = [16, 24, 32, 40, 48, 16]
    st.add_trials([create_trial(
        params={"QL_HIGH": q}, distributions={"QL_HIGH": IntDistribution(16, 1016, step=8)},
        value=1.0 - i / 100, state=TrialState.COMPLETE,
        user_attrs={"mem": 1.0 - i / 100, "perf": 1.0, "constraints": [],
                    "setting": f"QL_HIGH={q}", "allocator": "hc"}) for i, q in enumerate(ql)])
    return db


def _until(check, what, timeout=60):
    deadline = time.time() + timeout
    while not check():
        assert time.time() < deadline, what
        time.sleep(0.02)


def test_compiles_are_bounded_cached_and_leave_nothing_when_killed(tmp_path):
    db = _study(tmp_path)
    cc = tmp_path / "cc-wrapper"
    cc.write_text(WRAPPER)
    cc.chmod(0o755)
    log, gate, cache = tmp_path / "cc.log", tmp_path / "gate", tmp_path / "cache"
    env = {**os.environ, "CC": str(cc), "CC_LOG": str(log), "CC_GATE": str(gate),
           "HCTUNE_CACHE": str(cache)}

    def compiles():
        return len(log.read_text().split()) if log.exists() else 0

    srv = Served(db, "--data-dir", tmp_path / "data", env=env)
    try:
        answers = {}

        def get(n):
            try:
                answers[n] = srv.request("GET", f"/api/studies/s/emit/libhcmalloc.so?trial={n}")
            except (ConnectionError, http.client.HTTPException):
                pass                        # the one in the slot: its server is killed below
        threads = [threading.Thread(target=get, args=(n,), daemon=True) for n in range(4)]
        for t in threads:
            t.start()
        # one compile holds the slot (at the gate); the three others are refused at once
        _until(lambda: len(answers) == 3, f"three answers: {answers}")
        assert sorted(s for s, _ in answers.values()) == [429] * 3, answers
        assert all("ask again" in e["error"] for _, e in answers.values())
        assert (tmp_path / "gate.started").exists() and compiles() == 1
        c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)
        # (a setting none of the four asked for: a request for the one being compiled waits
        # for it, whichever of 0-3 got the slot)
        c.request("GET", "/api/studies/s/emit/libhcmalloc.so?trial=4")
        r = c.getresponse()
        r.read()
        assert r.status == 429 and r.getheader("Retry-After") == "10"
        c.close()
        assert compiles() == 1
        # killed mid-compile (its compiler with it)
        os.killpg(srv.proc.pid, signal.SIGKILL)
        srv.proc.wait()
    finally:
        srv.stop()
    left = [p.name for p in (cache / "hc").iterdir() if p.name.startswith(".")]
    assert left, "the killed compile's temporary directory (else the test shows nothing)"
    gate.touch()
    srv = Served(db, "--data-dir", tmp_path / "data", env=env)
    try:
        status, so = srv.request("GET", "/api/studies/s/emit/libhcmalloc.so?trial=0")
        assert status == 200 and so[:4] == b"\x7fELF", so[:200]
        assert compiles() == 2
        assert [p.name for p in (cache / "hc").iterdir() if p.name.startswith(".")] == []
        # made already, or in the build cache (trial 5 measured trial 0's setting): no compile
        for n in (0, 5):
            status, again = srv.request("GET", f"/api/studies/s/emit/libhcmalloc.so?trial={n}")
            assert status == 200 and again == so
        assert compiles() == 2
    finally:
        srv.stop()
