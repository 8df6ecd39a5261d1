"""The study views of `hctune serve` over HTTP on a real server: the trial table is filtered,
sorted and paged by the server (bounded pages, every parameter checked), marks the Pareto front
of (footprint, speed), and answers 304 to an unchanged page; the studies list comes alone for
its refresh; and stored rows with odd content (unicode, very long strings, NaN and infinite
ratios, attributes of the wrong type, markup) break no page and no JSON answer."""

import json
import math
import os
import urllib.parse

import optuna
import pytest
from optuna.distributions import CategoricalDistribution, IntDistribution
from optuna.trial import TrialState, create_trial

from hctune import jobs
from hctune.db import Database
from hctune.search.storage import default_url, open_storage
from serve_support import Served

pytestmark = pytest.mark.timeout(120)

DIST = {"QL_HIGH": IntDistribution(8, 512, step=8)}
ODD = "ødd-☃-名前-" + "x" * 300          # a long unicode study name


def trial(i, state=TrialState.COMPLETE, **attrs):
    k = i * 37 % 50                      # footprint and speed traded: a front of several
    a = {"mem": 0.7 + k / 100, "perf": 0.9 + (i * 11 % 30) / 100 + (49 - k) / 100,
         "constraints": [], "setting": f"MONITOR=0,QL_HIGH={8 * (i % 64 + 1)}",
         "worker": "test:1", "allocator": "jemalloc" if i % 3 == 0 else "hc"}
    a.update(attrs)
    a = {k: v for k, v in a.items() if v is not None}
    done = state == TrialState.COMPLETE
    return create_trial(params={"QL_HIGH": 8 * (i % 64 + 1)}, distributions=DIST,
                        value=(a["mem"] if isinstance(a.get("mem"), float) and
                               math.isfinite(a["mem"]) else 0.0) if done else None,
                        state=state, user_attrs=a)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A server (no workers) over a database holding a done study 'table' of 60 trials (two
    allocators, some failed or running) and a study ODD whose rows hold odd content."""
    tmp = tmp_path_factory.mktemp("views")
    db = tmp / "hctune.db"
    with Database(db) as d:
        for name in ("table", ODD):
            qid = jobs.enqueue(d, name, [1], {"objective": "pareto", "metric": "time",
                                              "trials": 60})
            jobs.claim(d)
            jobs.finish(d, qid)
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    storage = open_storage(default_url(db))
    st = optuna.create_study(study_name="table", storage=storage)
    st.add_trials([trial(i, TrialState.FAIL if i % 10 == 7 else
                         TrialState.RUNNING if i == 59 else TrialState.COMPLETE)
                   for i in range(60)])
    odd = optuna.create_study(study_name=ODD, storage=storage)
    odd.add_trials([
        trial(0), trial(1),
        trial(2, mem=float("nan")), trial(3, perf=float("inf")), trial(4, mem=-float("inf")),
        trial(5, setting="QL_HIGH=72,☃=" + "é" * 100_000),          # very long, unicode
        trial(6, setting="<script>alert(1)</script>", seed="</code><b>x</b>",
              error="<img src=x onerror=alert(1)>"),
        trial(7, mem="not a number", perf=[1, 2]),                   # the wrong types
        trial(8, constraints=["x"], allocator=None, worker=None, seed={"a": [1]}),
        trial(9, state=TrialState.FAIL, error="💥" * 5000, retry_of="three"),
        trial(10, mem=1e308 * 10, perf=float("nan"), setting=None),
    ])
    # a cross-allocator study: each allocator has knobs of its own
    cross = optuna.create_study(study_name="cross", storage=storage)
    alloc = CategoricalDistribution(["hc", "jemalloc"])
    for i in range(12):
        je = i % 2 == 1
        params = {"allocator": "jemalloc" if je else "hc",
                  **({"dirty_decay_ms": 100 * i} if je else {"QL_HIGH": 8 * (i + 1)})}
        dist = {"allocator": alloc, **({"dirty_decay_ms": IntDistribution(0, 10_000)} if je
                                       else {"QL_HIGH": DIST["QL_HIGH"]})}
        mem = (0.6 if je else 0.9) + i / 100
        cross.add_trial(create_trial(params=params, distributions=dist, value=mem,
                                     user_attrs={"mem": mem, "perf": 1.0 - i / 50,
                                                 "constraints": [], "setting": "",
                                                 "allocator": params["allocator"]}))
    with Database(db) as d:
        qid = jobs.enqueue(d, "cross", [1], {"objective": "mem", "metric": "time",
                                             "trials": 12, "allocators": ["hc", "jemalloc"]})
        jobs.claim(d)
        jobs.finish(d, qid)
    srv = Served(db)
    try:
        yield srv
    finally:
        srv.stop()


def strict(data):
    """JSON as a browser's JSON.parse reads it: NaN and Infinity are not JSON."""
    def bad(c):
        raise AssertionError(f"not JSON: {c}")
    return json.loads(data, parse_constant=bad)


def get(srv, path, headers=None):
    import urllib.request
    req = urllib.request.Request(srv.base + path, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def table(srv, study="table", **q):
    status, _, body = get(srv, f"/api/studies/{urllib.parse.quote(study, safe='')}/table?"
                          + urllib.parse.urlencode(q))
    assert status == 200, body
    return strict(body)


def test_the_table_is_paged_filtered_and_sorted_by_the_server(served):
    first = table(served, limit=25)
    assert (first["total"], first["matched"], first["offset"], len(first["trials"])) == \
        (60, 60, 0, 25)
    assert [t["number"] for t in first["trials"]] == list(range(59, 34, -1))   # newest first
    last = table(served, limit=25, offset=50)
    assert [t["number"] for t in last["trials"]] == list(range(9, -1, -1))
    assert table(served, offset=100)["trials"] == []
    failed = table(served, state="fail", limit=200)
    assert [t["number"] for t in failed["trials"]] == [57, 47, 37, 27, 17, 7]
    assert {t["state"] for t in failed["trials"]} == {"fail"} and failed["matched"] == 6
    je = table(served, allocator="jemalloc", limit=200)
    assert je["matched"] == 20 and {t["allocator"] for t in je["trials"]} == {"jemalloc"}
    assert table(served)["allocators"] == ["hc", "jemalloc"]
    # knob value text, any case; 72 = 8 * 9: trial 8 only
    assert [t["number"] for t in table(served, q="ql_high=72,")["trials"]] == []
    assert [t["number"] for t in table(served, q="ql_high=72")["trials"]] == [8]
    by_mem = table(served, sort="mem_ratio", desc="false", limit=200)["trials"]
    mems = [t["mem_ratio"] for t in by_mem]
    done = [m for m in mems if m is not None]
    assert done == sorted(done) and mems[len(done):] == [None] * (60 - len(done))
    assert table(served, sort="allocator", limit=1)["trials"][0]["allocator"] == "jemalloc"


def test_the_pareto_front_is_marked_and_can_be_the_filter(served):
    rows = table(served, limit=200)["trials"]
    pts = [(r["mem_ratio"], r["perf_ratio"], r["number"]) for r in rows
           if r["state"] == "complete"]
    expect = sorted(n for m, p, n in pts
                    if not any((m2, p2) != (m, p) and m2 <= m and p2 <= p for m2, p2, _ in pts))
    got = table(served)
    assert sorted(got["front"]) == expect and len(expect) >= 2
    assert sorted(r["number"] for r in rows if r["front"]) == expect
    only = table(served, front="true", limit=200)
    assert sorted(t["number"] for t in only["trials"]) == expect
    assert only["matched"] == len(expect)


def test_the_tables_numbers_are_checked(served):
    base = "/api/studies/table/table?"
    for q in ("limit=0", "limit=201", "limit=x", "offset=-1", "offset=99999999999",
              "sort=setting", "sort=__class__", "state=done", "desc=maybe",
              "q=" + "a" * 201, "allocator=" + "a" * 65):
        status, _, body = get(served, base + q)
        assert status == 422, (q, status, body)
        assert set(strict(body)) == {"error"}, (q, body)
    assert get(served, "/api/studies/nothere/table")[0] == 404


def test_an_unchanged_page_is_a_304(served):
    status, headers, body = get(served, "/api/studies/table/table?limit=10")
    assert status == 200
    etag = headers["ETag"]
    status, _, body = get(served, "/api/studies/table/table?limit=10",
                          {"If-None-Match": etag})
    assert status == 304 and body == b""
    other = get(served, "/api/studies/table/table?limit=11")[1]["ETag"]
    assert other != etag


def test_the_studies_list_comes_alone_for_its_refresh(served):
    status, headers, body = get(served, "/studies?part=table")
    assert status == 200 and body.startswith(b"{#") is False
    html = body.decode()
    assert 'id="studies-table"' in html and "<form" not in html and "<html" not in html
    assert "/studies/table" in html
    assert get(served, "/studies?part=table", {"If-None-Match": headers["ETag"]})[0] == 304
    assert get(served, "/studies?part=form")[0] == 422
    page = get(served, "/studies")[2].decode()
    assert 'id="studies-table"' in page and "part=table" in page   # the page's refresh


def test_odd_rows_break_no_page(served):
    name = urllib.parse.quote(ODD, safe="")
    for path in ("/studies", "/studies?part=table", f"/studies/{name}"):
        status, _, body = get(served, path)
        assert status == 200, (path, body[:500])
        html = body.decode()
        assert "<script>alert" not in html and "<img src=x" not in html, path
    assert f'href="/studies/{name}"' in get(served, "/studies")[2].decode()
    for path in ("/api/studies", f"/api/studies/{name}", f"/api/studies/{name}?trials=false",
                 f"/api/studies/{name}/trials", f"/api/studies/{name}/trials?since=5",
                 f"/api/studies/{name}/table?limit=200",
                 f"/api/studies/{name}/table?sort=mem_ratio&limit=200",
                 f"/api/studies/{name}/table?sort=seed&q=%E2%98%83",
                 f"/api/studies/{name}/table?front=true"):
        status, _, body = get(served, path)
        assert status == 200, (path, body[:500])
        strict(body)
    rows = {t["number"]: t for t in table(served, ODD, limit=200)["trials"]}
    assert len(rows) == 11
    assert rows[2]["mem_ratio"] is None and rows[3]["perf_ratio"] is None
    assert rows[7]["mem_ratio"] is None and rows[7]["perf_ratio"] is None
    assert rows[10]["mem_ratio"] is None and rows[10]["setting"] is None
    assert rows[5]["setting"].startswith("QL_HIGH=72,☃=é") and len(rows[5]["setting"]) < 5000
    assert rows[8]["feasible"] is False and rows[8]["allocator"] == "hc"
    assert isinstance(rows[8]["seed"], str) and rows[9]["retry_of"] is None
    assert rows[6]["setting"] == "<script>alert(1)</script>"     # as stored; the page escapes
    front = table(served, ODD)["front"]
    assert front and set(front) <= {0, 1, 5, 6}         # no NaN, no infinity, no string on it
    for r in rows.values():
        for k in ("mem_ratio", "perf_ratio"):
            assert r[k] is None or math.isfinite(r[k])
    for kind in ("history", "importance", "parallel"):
        status, _, body = get(served, f"/api/studies/{name}/views/{kind}.svg")
        assert status in (200, 409), (kind, status, body[:300])
        if kind == "history":       # drawn from the trials whose ratios are numbers
            assert status == 200 and body.startswith(b"<svg"), body[:300]


def test_a_cross_allocator_studys_views_draw_the_best_allocators_knobs(served):
    """Optuna's parallel coordinates of trials with different knobs would be empty: the
    importance and the parallel coordinates are of the best allocator's trials, and say so."""
    for kind in ("importance", "parallel"):
        status, _, body = get(served, f"/api/studies/cross/views/{kind}.svg")
        assert status == 200, (kind, body[:300])
        assert b"jemalloc's trials" in body and b"dirty_decay_ms" in body, kind
        assert b">allocator<" not in body, kind
        assert b"QL_HIGH" not in body
    status, _, body = get(served, "/api/studies/cross/views/history.svg")
    assert status == 200 and b"'s trials" not in body
    rows = table(served, "cross", allocator="jemalloc")["trials"]
    assert len(rows) == 6 and {r["allocator"] for r in rows} == {"jemalloc"}
    # each allocator's own (issue 33: not only the best's)
    status, _, body = get(served, "/api/studies/cross/views/parallel.svg?allocator=hc")
    assert status == 200 and b"hc's trials" in body and b"QL_HIGH" in body, body[:300]
    assert b"dirty_decay_ms" not in body
    assert get(served, "/api/studies/cross/views/parallel.svg?allocator=nope")[0] == 422


def test_the_table_needs_the_token_as_every_read(tmp_path):
    srv = Served(tmp_path / "hctune.db", env={**os.environ, "HCTUNE_TOKEN": "tok-for-the-browser-tests"})
    try:
        assert get(srv, "/api/studies/table/table")[0] == 401
        assert get(srv, "/studies?part=table")[0] in (303, 307, 401)
        status, _, body = get(srv, "/api/studies/table/table", {"Authorization": "Bearer tok-for-the-browser-tests"})
        assert status == 404 and "error" in strict(body)       # no such study, said in JSON
        status, _, body = get(srv, "/studies?part=table", {"Authorization": "Bearer tok-for-the-browser-tests"})
        assert status == 200 and b"none yet" in body
    finally:
        srv.stop()


def test_the_lists_refresh_reads_a_finished_study_once(served, tmp_path):
    """The studies list is asked for every 5 s by every open tab: a finished study's summary is
    read once, then kept (it never changes); a running one is read each time."""
    from hctune.serve import pages
    from hctune.serve.state import Config, Service
    svc = Service(Config(served.db, default_url(served.db), tmp_path / "data"))
    asked = []
    real = svc.trials.get
    svc.trials.get = lambda name, state: asked.append(name) or real(name, state)
    rows, first = pages._summaries(svc)
    assert sorted(asked) == sorted(["table", ODD, "cross"])
    assert first["table"]["finished"] == 53
    asked.clear()
    again = pages._summaries(svc)[1]
    assert asked == [] and again == first
    with Database(served.db) as d:
        jobs.enqueue(d, "live", [1], {"objective": "mem", "trials": 5})
        jobs.claim(d)
    asked.clear()
    pages._summaries(svc)
    pages._summaries(svc)
    assert asked == ["live", "live"]           # running: read each time
