"""`hctune search`, `best` and `report` end to end on a real trace (gawk, recorded with the
LD_PRELOAD tracer), with the real replay harness and real HC builds."""

import json
import re
import signal
import sqlite3
import time

import optuna
import pytest

import gate
from search_support import (Postgres, hctune, hctune_popen, need_hc, record_gawk_trace)

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    need_hc()
    return record_gawk_trace(tmp_path_factory.mktemp("trace") / "gawk.trace")


def completed_while_running(db) -> int:
    """Finished trials, read with plain SQLite while the search process may still be creating
    Optuna's schema (opening an Optuna storage here would race it for the schema's creation)."""
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as con:
            return con.execute("SELECT COUNT(*) FROM trials WHERE state = 'COMPLETE'").fetchone()[0]
    except sqlite3.OperationalError:  # no file or no table yet
        return 0


def finished(url, name):
    st = optuna.load_study(study_name=name, storage=url)
    return [t for t in st.get_trials(deepcopy=False)
            if t.state == optuna.trial.TrialState.COMPLETE]


def evaluated(url, name):
    """The trials --trials counts: finished, or pruned once they had lost (a replay past the
    best's peak RSS; not those skipped or stopped at a deadline)."""
    st = optuna.load_study(study_name=name, storage=url)
    return [t for t in st.get_trials(deepcopy=False)
            if t.state == optuna.trial.TrialState.COMPLETE or (
                t.state == optuna.trial.TrialState.PRUNED
                and not {"skipped", "stopped"} & set(t.user_attrs))]


def test_search_stores_trials_and_measurements(trace, tmp_path):
    db = tmp_path / "hctune.db"
    r = hctune(db, "search", trace, "--objective", "mem", "--trials", 4, "--repeat", 1,
               "--allocators", "hc", "--json")
    out = json.loads(r.stdout)
    # --trials counts evaluated trials: finished, or pruned because their replay had already
    # lost to the best (its RSS past the best's by 10 %: search/study.py, prune_bounds)
    acc = out["trials"]
    assert acc["trials"] == 4 and out["failed"] == 0 and acc["failed"] == 0
    assert out["finished"] + acc["pruned"] == 4 and out["finished"] >= 2
    con = sqlite3.connect(db)
    # Optuna's tables and hctune's in one file
    assert con.execute("SELECT COUNT(*) FROM trials WHERE state = 'COMPLETE'"
                       ).fetchone()[0] == out["finished"]
    hc = con.execute("SELECT COUNT(DISTINCT setting) FROM hc_measurements"
                     " WHERE allocator = 'hc'").fetchone()[0]
    glibc = con.execute("SELECT COUNT(*) FROM hc_measurements WHERE allocator = 'glibc'"
                        ).fetchone()[0]
    assert out["finished"] <= hc <= 4 and glibc == 1
    assert con.execute("SELECT objective FROM hc_studies").fetchone()[0] == "mem"
    best = json.loads(hctune(db, "best", "--json").stdout)
    t = best["traces"][0]
    assert t["tuned"]["footprint_bytes"] > 0 and t["glibc"]["time_ns_per_op"] > 0
    assert best["trial"] == out["best_mem"]["trial"]
    # the generic seed is trial 0, so best cannot be worse than generic on the objective
    assert t["vs_generic"]["footprint"] <= 1.0 + 1e-9
    # the same command again: nothing new is measured
    before = con.execute("SELECT COUNT(*) FROM hc_measurements").fetchone()[0]
    hctune(db, "search", trace, "--objective", "mem", "--trials", 4, "--repeat", 1,
           "--allocators", "hc")
    assert con.execute("SELECT COUNT(*) FROM hc_measurements").fetchone()[0] == before
    page = tmp_path / "report.html"
    hctune(db, "report", "-o", page)
    html = page.read_text()
    assert html.count("<svg") >= 4 and 'id="hctune-data"' in html
    # no network resources: nothing is fetched from a URL (xmlns names are not fetched)
    assert not re.search(r'(src|href|url)\s*[=(]\s*["\']?(https?:)?//', html)


def test_sigint_keeps_finished_trials_and_the_rerun_continues(trace, tmp_path):
    db = tmp_path / "hctune.db"
    url = f"sqlite:///{db}"
    args = ("search", trace, "--objective", "perf", "--study", "resume", "--repeat", 1,
            "--allocators", "hc")
    p = hctune_popen(db, *args, "--trials", 40)
    deadline = time.time() + 120
    while time.time() < deadline and p.poll() is None:
        time.sleep(0.3)
        if completed_while_running(db) >= 2:
            break
    assert p.poll() is None, p.communicate()
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 130, err
    assert "Traceback" not in err
    kept = {t.number: t.value for t in finished(url, "resume")}
    assert len(kept) >= 2
    r = hctune(db, *args, "--trials", len(kept) + 2, "--json")
    assert json.loads(r.stdout)["finished"] == len(kept) + 2
    now = {t.number: t.value for t in finished(url, "resume")}
    assert all(now[n] == v for n, v in kept.items())
    # the interrupted trial was closed as failed, not left RUNNING for the heartbeat to find
    st = optuna.load_study(study_name="resume", storage=url)
    assert not [t for t in st.trials if t.state == optuna.trial.TrialState.RUNNING]


@pytest.mark.parametrize("args,message", [
    (("search", "--objective", "speed"), "Invalid value for '--objective'"),
    (("search", "{empty}"), "is empty"),
    (("search", "{trace}", "--storage", "postgresql://nobody@127.0.0.1:1/x"), "cannot use storage"),
    (("best", "--study", "nope"), "no study named 'nope'"),
    (("emit", "--study", "nope", "-o", "{tmp}/m.c"), "no study named 'nope'"),
    (("report", "--study", "nope", "-o", "{tmp}/r.html"), "no study named 'nope'"),
])
def test_bad_input_is_one_line_and_exit_2(trace, tmp_path, args, message):
    db = tmp_path / "hctune.db"
    (tmp_path / "empty.trace").write_bytes(b"")
    args = [a.format(empty=tmp_path / "empty.trace", trace=trace, tmp=tmp_path) for a in args]
    r = hctune(db, *args, check=False)
    assert r.returncode == 2, r.stderr
    assert message in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "m.c").exists() and not (tmp_path / "r.html").exists()


def test_two_processes_share_one_study_on_postgresql(trace, tmp_path):
    pg = Postgres(tmp_path).start()
    try:
        # each runs at least one trial: their first ones wait for each other (tests/gate.py)
        meet = gate.env(meet=(tmp_path / "meet", 2))
        procs = [gate.popen(tmp_path / f"worker{i}.db", "search", trace, "--objective", "mem",
                            "--storage", pg.url, "--study", "shared", "--trials", 8,
                            "--repeat", 1, "--allocators", "hc", "--json", env=meet)
                 for i in range(2)]
        outs = [p.communicate(timeout=240) for p in procs]
        for p, (out, err) in zip(procs, outs):
            assert p.returncode == 0, err
        done = evaluated(pg.url, "shared")
        workers = {t.user_attrs["worker"] for t in done}
        # finished, or pruned once they had lost (7 when both skipped their last trial, each
        # seeing the other's running: search.study.run goes round again now); else say why
        st = optuna.load_study(study_name="shared", storage=pg.url)
        other = [(t.number, t.state.name, t.user_attrs) for t in st.get_trials(deepcopy=False)
                 if t.state.name in ("FAIL", "PRUNED")]
        assert len(done) >= 8, other
        assert len(workers) == 2, workers       # both processes ran trials of the one study
        assert len(list((tmp_path / "meet").iterdir())) == 2
        for out, _ in outs:                     # and each sees every trial, its own and the other's
            assert json.loads(out)["evaluated"] >= 8
    finally:
        pg.stop()
