"""The trials `hctune serve` keeps in memory (hctune.serve.trials) stay correct while a worker
writes: a trial finished after a read shows in the next read once the cache's time is up, a
trial read while running is read again until it finishes, a change of the study's state is
never served stale, and the API's ?since=N and ETag (304) answer what changed. Over a real
server too, with several HTTP worker processes."""

import json
import threading
import warnings

import optuna
import pytest
from optuna.distributions import IntDistribution
from optuna.trial import TrialState, create_trial

from hctune import jobs
from hctune.db import Database
from hctune.search import study as _study
from hctune.search.storage import default_url, open_storage
from hctune.serve.trials import TrialsCache
from serve_support import Served

pytestmark = pytest.mark.timeout(120)

DIST = {"QL_HIGH": IntDistribution(8, 512, step=8)}


def attrs(i):
    return {"mem": 0.8 + (i % 10) / 50, "perf": 1.0 + (i % 7) / 100, "constraints": [],
            "setting": f"MONITOR=0,QL_HIGH={8 * (i % 64 + 1)}", "worker": "test:1"}


def finished(i):
    return create_trial(params={"QL_HIGH": 8 * (i % 64 + 1)}, distributions=DIST,
                        value=attrs(i)["mem"], state=TrialState.COMPLETE, user_attrs=attrs(i))


@pytest.fixture
def study(tmp_path):
    """A queued-and-running study 'live' of 5 finished trials in a fresh database; (db, url)."""
    db = tmp_path / "hctune.db"
    with Database(db) as d:
        jobs.enqueue(d, "live", [1], {"objective": "mem", "metric": "time", "trials": 50})
        jobs.claim(d)
    url = default_url(db)
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    st = optuna.create_study(study_name="live", storage=open_storage(url))
    st.add_trials([finished(i) for i in range(5)])
    return db, url


def writer(url):
    warnings.simplefilter("ignore")   # Optuna: heartbeats are meant for optimize()
    return optuna.load_study(study_name="live", storage=open_storage(url),
                             sampler=optuna.samplers.RandomSampler(seed=0))


def states(snap):
    return [r["state"] for r in snap.rows()]


def test_incremental_reads_see_new_and_finished_trials(study):
    db, url = study
    storage = open_storage(url)
    cache = TrialsCache(lambda: storage, ttl=0)        # every read refreshes
    first = cache.get("live", "running")
    assert states(first) == ["complete"] * 5
    w = writer(url)
    t = w.ask(DIST)                                    # running, as a worker's trial is
    t.set_user_attr("worker", "test:2")
    snap = cache.get("live", "running")
    assert states(snap) == ["complete"] * 5 + ["running"]
    assert snap.rows()[5]["mem_ratio"] is None
    for k, v in attrs(5).items():
        t.set_user_attr(k, v)
    w.tell(t, attrs(5)["mem"])                         # finished after the cached read
    w.add_trial(finished(6))
    snap = cache.get("live", "running")
    rows = snap.rows()
    assert states(snap) == ["complete"] * 7
    assert rows[5]["mem_ratio"] == attrs(5)["mem"] and rows[5]["worker"] == "test:1"
    assert rows[5]["feasible"] is True
    # the same as a whole read of the study, and the summary as hctune computes it from one
    full = optuna.load_study(study_name="live", storage=open_storage(url))
    assert [r["number"] for r in rows] == [x.number for x in full.get_trials()]
    assert snap.summary("mem") == _study.summary(full, "mem")
    assert first.rows() == rows[:5]                    # an old read is never changed


def test_reads_within_ttl_are_cached_but_a_state_change_is_not(study):
    db, url = study
    storage = open_storage(url)
    cache = TrialsCache(lambda: storage, ttl=3600)
    snap = cache.get("live", "running")
    writer(url).add_trial(finished(5))
    assert cache.get("live", "running") is snap        # within its time: the last read
    done = cache.get("live", "done")                   # the study's state changed: read again
    assert done is not snap and len(done.rows()) == 6 and done.state == "done"


def test_readers_do_not_wait_for_a_refresh(study):
    db, url = study
    storage = open_storage(url)
    cache = TrialsCache(lambda: storage, ttl=0)
    snap = cache.get("live", "running")
    entry = cache._entries["live"]
    with entry.lock:                                   # another request is refreshing
        got = []
        t = threading.Thread(target=lambda: got.append(cache.get("live", "running")))
        t.start()
        t.join(5)
        assert got == [snap]                           # served the last read at once


def test_at_most_max_studies_are_kept(study):
    db, url = study
    storage = open_storage(url)
    optuna.create_study(study_name="other", storage=storage).add_trial(finished(0))
    cache = TrialsCache(lambda: storage, ttl=3600, max_studies=1)
    live = cache.get("live", "running")
    assert len(cache.get("other", "running").rows()) == 1
    assert list(cache._entries) == ["other"]          # the least recently used went
    again = cache.get("live", "running")
    assert again is not live and again.rows() == live.rows()
    assert cache.get("nothere", "queued") is None


def test_since_and_etag(study):
    db, url = study
    storage = open_storage(url)
    snap = TrialsCache(lambda: storage, ttl=0).get("live", "running")
    body, etag = snap.since(0)
    assert body == snap.blob and etag == snap.etag
    body3, etag3 = snap.since(3)
    assert [r["number"] for r in json.loads(body3)] == [3, 4] and etag3 != etag
    assert json.loads(snap.since(99)[0]) == []
    # the ETag is the content's: another process reading the same trials gives the same one
    other = TrialsCache(lambda: open_storage(url), ttl=0).get("live", "running")
    assert other.etag == etag and other.since(3)[1] == etag3
    writer(url).add_trial(finished(5))
    assert TrialsCache(lambda: storage, ttl=0).get("live", "running").etag != etag


@pytest.mark.parametrize("http_workers", [1, 2])
def test_api_since_etag_and_state(study, http_workers):
    db, url = study
    srv = Served(db, "--http-workers", http_workers, "--trials-ttl", 0)   # no cache to outwait
    try:
        def get(path, headers=None):
            return srv.request("GET", path, headers=headers)

        def trials(query="", headers=None):
            import urllib.request
            req = urllib.request.Request(srv.base + "/api/studies/live/trials" + query,
                                         headers=headers or {})
            try:
                with urllib.request.urlopen(req, timeout=30) as r:
                    return r.status, r.headers.get("etag"), json.loads(r.read())
            except urllib.error.HTTPError as e:
                return e.code, e.headers.get("etag"), e.read()

        status, etag, rows = trials()
        assert status == 200 and [r["number"] for r in rows] == list(range(5))
        assert trials(headers={"If-None-Match": etag})[:2] == (304, etag)
        status, etag2, rows = trials("?since=3")
        assert status == 200 and [r["number"] for r in rows] == [3, 4]
        assert trials("?since=3", {"If-None-Match": etag2})[0] == 304
        assert trials("?since=-1")[0] == 422
        status, s = get("/api/studies/live?trials=false")
        assert status == 200 and "trials" not in s and s["summary"]["finished"] == 5
        assert len(get("/api/studies/live")[1]["trials"]) == 5

        writer(url).add_trial(finished(5))             # a worker finishes a trial
        for _ in range(6):                             # whichever process answers
            status, etag3, rows = trials()
            assert status == 200 and len(rows) == 6 and etag3 != etag
            status, _, rows = trials("?since=5")
            assert [r["number"] for r in rows] == [5]
        assert trials(headers={"If-None-Match": etag})[0] == 200

        w = writer(url)
        w.add_trial(finished(6))
        with Database(db) as d:                        # the study ends: seen at once
            jobs.finish(d, jobs.job(d, "live")["id"])
        for _ in range(4):
            status, s = get("/api/studies/live")
            assert s["state"] == "done" and len(s["trials"]) == 7, s["state"]
            assert len(trials()[2]) == 7
        status, page = get("/studies/live")
        assert status == 200 and b"since=" in page
    finally:
        srv.stop()
