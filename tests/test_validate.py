"""`hctune validate` and `search --validate` on a small real program (tests/c/validate_app.c,
~20-30 ms a run): every candidate runs, every run is stored, the JSON carries medians,
intervals, the winner and the verdict; broken allocators are disqualified; `emit` carries the
real-run evidence; bad input is one line and exit 2."""

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest

from conftest import header_text
from hctune import validate as _validate
from hctune.db import Database
from search_support import hctune, need_hc

pytestmark = pytest.mark.timeout(400)

RUNS = 3


@pytest.fixture(scope="module")
def app(c_program):
    return c_program("validate_app")


@pytest.fixture(scope="module")
def searched(app, tmp_path_factory):
    """profile the app, then `search --objective perf --validate` (few trials, 3 runs)."""
    need_hc()
    d = tmp_path_factory.mktemp("validate")
    db = d / "hctune.db"
    hctune(db, "profile", "-o", d / "app.hct", app, "60000", cwd=d)
    r = hctune(db, "search", "--objective", "perf", "--trials", 3, "--repeat", 1, "--seed", 1,
               "--allocators", "hc", "--validate", "--validate-runs", RUNS, "--validate-top", 2, "--json", cwd=d)
    return d, db, json.loads(r.stdout)


def test_profile_records_the_command(searched, app):
    d, db, _ = searched
    with Database(db) as con:
        inv = con.invocation(con.latest_trace())
    assert inv == {"argv": [str(app), "60000"], "cwd": str(d), "stdin": None}


def test_profile_records_stdin_when_it_is_a_file(app, tmp_path):
    db = tmp_path / "hctune.db"
    feed = tmp_path / "input.txt"
    feed.write_text("unused by the program\n")
    with open(feed) as f:
        hctune(db, "profile", "-o", tmp_path / "t.hct", app, "1000", cwd=tmp_path, stdin=f)
    with Database(db) as con:
        assert con.invocation(con.latest_trace())["stdin"] == str(feed)


def test_search_validate_runs_every_candidate_and_stores_the_runs(searched):
    d, db, out = searched
    v = out["validation"]
    labels = [c["candidate"] for c in v["candidates"]]
    assert "hc generic" in labels and "glibc" in labels
    assert any(lbl.startswith("tuned #") for lbl in labels)
    for c in v["candidates"]:
        assert c["runs"] == RUNS and c["disqualified"] is None, c
        for m in ("wall_s", "cpu_s", "peak_rss_bytes"):
            lo, hi = c["ci"][m]
            assert lo <= c["median"][m] <= hi and c["median"][m] > 0
        if c["candidate"] != "glibc":
            r = c["vs_glibc"]["wall_s"]
            assert r["ci"][0] <= r["ratio"] <= r["ci"][1]
    assert v["winner"]["kind"] in ("tuned", "generic") and v["verdict"]
    assert v["program"]["argv"][1:] == ["60000"]
    con = sqlite3.connect(db)
    n = con.execute("SELECT COUNT(*) FROM hc_real_runs WHERE validation_id = ?",
                    (v["validation_id"],)).fetchone()[0]
    assert n == RUNS * len(labels)
    status, winner = con.execute("SELECT status, winner FROM hc_validations WHERE id = ?",
                                 (v["validation_id"],)).fetchone()
    assert status == "done" and winner == v["winner"]["candidate"]


def test_emit_carries_the_real_run_evidence(searched):
    d, db, out = searched
    v = out["validation"]
    hctune(db, "emit", "-o", d / "malloc.c")
    head = header_text((d / "malloc.c").read_text())
    assert f"validation #{v['validation_id']}" in head
    assert f"{RUNS} interleaved real runs" in head
    assert "validate_app 60000" in head and "real ratios:" in head and "verdict:" in head
    emitted = json.loads(hctune(db, "emit", "-o", d / "m2.c", "--json").stdout)["setting"]
    assert emitted == _validate.winner_setting(v)
    best = json.loads(hctune(db, "best", "--json").stdout)
    assert best["chosen_by"] == "real runs"
    assert best["validation"]["winner"] == v["winner"]
    assert best["setting"] == _validate.winner_setting(v)
    text = hctune(db, "best").stdout
    assert "chosen by real runs" in text and "verdict:" in text


def test_validate_on_another_input_with_json(searched, app):
    d, db, _ = searched
    r = hctune(db, "validate", "--runs", RUNS, "--top", 1, "--no-references", "--json", "--",
               app, "40000", "7", cwd=d)
    v = json.loads(r.stdout)
    assert v["program"]["argv"] == [str(app), "40000", "7"]
    assert {c["candidate"] for c in v["candidates"]} == {"tuned #1", "hc generic", "glibc"}
    assert {"median", "ci", "vs_generic", "vs_glibc"} <= set(v["candidates"][0])
    assert v["winner"] and v["verdict"] and v["output_check"].startswith("stdout")


def test_broken_allocators_are_disqualified(searched, c_program, monkeypatch):
    """A build that changes the output (realloc keeps half the contents) and one that crashes
    (the 1000th free aborts) are disqualified, said so, and never win."""
    d, db, _ = searched
    broken = c_program("hc_broken", ("-fPIC", "-shared"))
    monkeypatch.chdir(d)
    v = _validate.validate(db, runs=RUNS, top=1, references=False,
                           extra=[("wrong output", broken, {"HC_BROKEN": "realloc"}),
                                  ("crashes", broken, {"HC_BROKEN": "crash"}),
                                  ("passthrough", broken)])
    by = {c["candidate"]: c for c in v["candidates"]}
    assert by["wrong output"]["disqualified"] == "output differs from glibc's"
    assert by["crashes"]["disqualified"].startswith("crashed (signal 6)")
    assert by["passthrough"]["disqualified"] is None and by["passthrough"]["runs"] == RUNS
    assert by["wrong output"]["runs"] == 0      # stopped after the first bad run
    assert v["winner"]["candidate"] in ("tuned #1", "hc generic")
    con = sqlite3.connect(db)
    problems = [p for (p,) in con.execute("SELECT problem FROM hc_real_runs WHERE "
                                          "validation_id = ? AND problem IS NOT NULL",
                                          (v["validation_id"],))]
    assert len(problems) == 2


def test_bad_input_is_one_line_and_exit_2(searched, app, tmp_path):
    d, db, _ = searched
    cases = [
        (("validate", "--runs", 2), "--runs must be at least 3"),
        (("validate", "--runs", 3, "--", tmp_path / "gone"), "program not found"),
        (("validate", "--study", "nope"), "no study named 'nope'"),
        (("search", "--validate", "--validate-runs", 1), "--validate-runs must be at least 3"),
    ]
    for args, message in cases:
        r = hctune(db, *args, check=False, cwd=d)
        assert r.returncode == 2, (args, r.stderr)
        assert message in r.stderr and "Traceback" not in r.stderr
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_a_profiled_program_that_is_gone_and_a_study_without_trials(app, tmp_path):
    need_hc()
    db = tmp_path / "hctune.db"
    copy = tmp_path / "app-copy"
    shutil.copy(app, copy)
    hctune(db, "profile", "-o", tmp_path / "t.hct", copy, "2000", cwd=tmp_path)
    # a study with no finished trial (as if every trial had failed or it was just created)
    with Database(db) as con:
        ids = [con.latest_trace()["id"]]
        con.add_study("empty", "perf", ids, f"sqlite:///{db}", {"metric": "time"})
    optuna.create_study(study_name="empty", storage=f"sqlite:///{db}")
    r = hctune(db, "validate", "--study", "empty", "--runs", 3, check=False, cwd=tmp_path)
    assert r.returncode == 2 and "has no finished trial" in r.stderr, r.stderr
    copy.unlink()
    r = hctune(db, "validate", "--study", "empty", "--runs", 3, check=False, cwd=tmp_path)
    assert r.returncode == 2 and "program not found" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


def test_summarize_picks_within_the_memory_limit():
    """perf: the fastest HC setting whose peak RSS stays within +10 % of glibc's wins."""
    def cand(label, kind):
        return _validate.Candidate(label, kind, "hc" if kind != "reference" else label,
                                   setting={} if kind != "reference" else None)
    cands = [cand("tuned #1", "tuned"), cand("tuned #2", "tuned"), cand("hc generic", "generic"),
             cand("glibc", "reference")]
    for c in cands:
        if c.setting is not None:
            c.setting = _validate._knobs.complete({})
    numbers = {"tuned #1": (0.50, 200), "tuned #2": (0.80, 105), "hc generic": (1.0, 100),
               "glibc": (1.1, 100)}
    runs = []
    for rnd in range(5):
        for label, (wall, rss) in numbers.items():
            runs.append({"candidate": label, "round": rnd, "wall_s": wall + rnd * 0.001,
                         "user_s": wall, "sys_s": 0.0, "peak_rss_bytes": rss << 20,
                         "problem": None})
    s = _validate.summarize(cands, runs, "perf")
    assert s["winner"]["candidate"] == "tuned #2"
    assert any("tuned #1 left out" in n for n in s["notes"])
    assert s["significant"] and s["verdict"].startswith("use tuned #2 (HC): 20 % faster than "
                                                        "generic HC")
    s = _validate.summarize(cands, runs, "mem")
    assert s["winner"]["candidate"] == "hc generic"
    assert s["recommendation"]["candidate"] == "glibc"       # as small as generic HC: simpler
    assert s["verdict"].startswith("keep glibc: no allocator was significantly smaller")


def test_report_shows_real_runs_beside_the_replay(searched):
    d, db, _ = searched
    v = _validate.latest(db)
    hctune(db, "report", "-o", d / "report.html")
    html = (d / "report.html").read_text()
    assert "<h2>Real runs</h2>" in html and f"Validation #{v['validation_id']}" in html
    assert "replay prediction" in html          # the plot's legend: prediction beside result
    assert html.count("<svg") >= 5
    data = html.split('id="hctune-data">', 1)[1].split("</script>", 1)[0]
    assert json.loads(data)["validation"]["winner"] == v["winner"]


def test_pareto_candidates_spread_along_the_front():
    front = list(range(10))                 # sorted by memory, as pareto_front returns it
    assert _validate._spread(front, 3) == [0, 4, 9]
    assert _validate._spread(front, 1) == [5]
    assert _validate._spread(front[:2], 3) == [0, 1]


def test_a_hung_run_is_killed_and_disqualifies(tmp_path):
    """The run and what it started in the background are killed (not waited for): the
    background child's pid is gone when run_once returns (a count, not a clock)."""
    pidfile = tmp_path / "child.pid"
    prog = _validate.Program(["sh", "-c", f"sleep 30 & echo $! > {pidfile}; sleep 30"],
                             str(tmp_path))
    row = _validate.run_once(_validate.hcrun(), prog,
                             _validate.Candidate("glibc", "reference", "glibc"), 0.5)
    assert row["problem"] == "timed out after 0.5 s"
    child = int(pidfile.read_text())
    stat = Path(f"/proc/{child}/stat")

    def state():
        try:
            return stat.read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return None
    # gone, or a zombie no one has reaped yet (its parent was killed with it); a killed process
    # can still be in D (exiting) for a moment on a busy machine: it was sent SIGKILL, which a
    # bounded look for its end shows (the kill, not a sleep, is what the test asserts)
    for _ in range(200):
        if state() in (None, "Z"):
            break
        time.sleep(0.01)
    assert state() in (None, "Z")


@pytest.fixture(scope="module")
def two_studies(searched, tmp_path_factory):
    """A copy of the searched database with a mem study of the same trace beside the perf one,
    validated through --objective (no study name copied)."""
    d, db, _ = searched
    d2 = tmp_path_factory.mktemp("two")
    db2 = d2 / "hctune.db"
    shutil.copy(db, db2)
    hctune(db2, "search", "--objective", "mem", "--trials", 2, "--repeat", 1, "--seed", 1,
           "--allocators", "hc", cwd=d)
    env = {**os.environ, "COLUMNS": "80"}
    with open(d2 / "out.txt", "w") as out:       # stdout to a file: no terminal anywhere
        r = subprocess.run([sys.executable, "-m", "hctune", "--db", str(db2), "validate",
                            "--objective", "mem", "--runs", str(RUNS), "--top", "1",
                            "--no-references"], stdout=out, stderr=subprocess.PIPE, text=True,
                           cwd=d, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    return d2, db2, (d2 / "out.txt").read_text(), r.stderr


def test_validate_without_a_terminal_prints_a_line_per_round(two_studies):
    _, _, _, err = two_studies
    for n in range(1, RUNS + 1):
        assert f"validate: round {n}/{RUNS} done (" in err, err
    assert "\r" not in err and "━" not in err           # no bar drawn into the file


def test_validate_table_is_not_clipped_at_80_columns(two_studies):
    _, db, out, _ = two_studies
    assert "…" not in out and "verdict: " in out
    assert max(len(line) for line in out.splitlines()) <= 80
    v = _validate.latest(db)
    text = " ".join(out.split())
    for c in v["candidates"]:
        r = c["vs_glibc"].get("peak_rss_bytes")
        if r:      # every interval is there in full
            assert f"{r['ci'][0]:.2f}–{r['ci'][1]:.2f}" in out, c["candidate"]
    assert " ".join(v["verdict"].split()) in text
    # the other objective's best joined the candidates (issue 19, item 4)
    from hctune import knobs
    from hctune.search import study as _study
    with Database(db) as con:
        row = con.latest_study("perf")
        _, st = _study.load(con, row["name"])
        perf_best = knobs.key(_study.trial_setting(_study.choose(st, "perf")))
    by = {c["setting"]: c for c in v["candidates"] if c["setting"]}
    assert perf_best in by
    if by[perf_best]["candidate"] == "perf best":
        assert by[perf_best]["origin"]["study"] == row["name"]


def test_studies_lists_both_objectives_with_their_verdicts(two_studies):
    _, db, _, _ = two_studies
    rows = json.loads(hctune(db, "studies", "--json").stdout)
    by = {r["objective"]: r for r in rows}
    assert set(by) == {"mem", "perf"}
    for o, r in by.items():
        assert r["trials"] >= 2 and r["traces"][0]["command"].endswith("60000")
        assert r["best"][o]["trial"] is not None
        assert r["validation"]["verdict"] and r["validation"]["recommendation"]
    text = hctune(db, "studies").stdout
    assert by["mem"]["name"] in text and by["perf"]["name"] in text
    assert text.count("validated (#") == 2
    only = json.loads(hctune(db, "studies", "--objective", "mem", "--json").stdout)
    assert [r["objective"] for r in only] == ["mem"]


CHROMIUM = os.environ.get("HCTUNE_CHROMIUM", "/usr/bin/chromium")


def test_report_summary_is_visible_without_scrolling_at_1280(searched):
    """Headless chromium, 1280 x 800: the summary (what to use, how much, how sure) is on the
    first screen; sizes are KiB/MiB, not raw bytes; the perf row is the perf study's best."""
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"no chromium at {CHROMIUM} (the Debian package chromium)")
    sync_api = pytest.importorskip("playwright.sync_api",
                                   reason="the pip package playwright is not installed")
    d, db, _ = searched
    page_path = d / "summary.html"
    hctune(db, "report", "--objective", "perf", "-o", page_path)
    html = page_path.read_text()
    data = json.loads(html.split('id="hctune-data">', 1)[1].split("</script>", 1)[0])
    assert data["summary"]["validated"] and data["summary"]["use"]
    assert data["best"]["perf"]["study"] == data["study"]
    assert " MiB</td>" in html or " KiB</td>" in html
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                     args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.goto(page_path.as_uri())
        box = page.evaluate("(() => { const r = document.getElementById('summary')"
                            ".getBoundingClientRect(); return [r.top, r.bottom]; })()")
        text = page.inner_text("#summary")
        browser.close()
    assert 0 <= box[0] and box[1] <= 800, box
    for words in ("What to use", "How much", "How sure"):
        assert words in text


def test_a_best_that_is_not_significant_emits_the_simpler_option(searched, tmp_path):
    """Issue 19, item 1: real runs where the study's best is 0.5 % faster than generic HC with
    an interval across 0: emit writes generic HC and its header says why."""
    from hctune import knobs
    from hctune.search import space
    _, db, _ = searched
    db2 = tmp_path / "hctune.db"
    shutil.copy(db, db2)
    v = _validate.latest(db2)
    tuned = next(c for c in v["candidates"] if c["kind"] == "tuned")
    generic = space.for_search(knobs.preset("generic"))
    cands = [_validate.Candidate("tuned #1", "tuned", "hc",
                                 setting=knobs.complete(knobs.parse_sets(
                                     tuned["setting"].split(","))), trial=tuned["trial"]),
             _validate.Candidate("hc generic", "generic", "hc", setting=generic),
             _validate.Candidate("glibc", "reference", "glibc")]
    wild = [0.08, -0.07, 0.06, -0.08, 0.07, -0.06, 0.08, -0.07, 0.05, -0.05]
    runs = [{"candidate": lbl, "round": r, "wall_s": w * (1 + (wild[r] if lbl == "tuned #1"
                                                                else 0)),
             "user_s": w, "sys_s": 0.0, "peak_rss_bytes": 100 << 20, "problem": None}
            for r in range(10) for lbl, w in (("tuned #1", 0.995), ("hc generic", 1.0),
                                              ("glibc", 1.2))]
    s = _validate.summarize(cands, runs, "perf")
    s.update(validation_id=0, study=v["study"], program=v["program"], runs=10,
             output_check="exit status only", date="2026-01-01T00:00:00+00:00")
    with Database(db2) as con:
        vid = con.add_validation(v["study"], "perf", ["./app"], str(tmp_path), None, 10)
        s["validation_id"] = vid
        con.finish_validation(vid, "done", s)
    out = json.loads(hctune(db2, "emit", "-o", tmp_path / "m.c", "--json").stdout)
    assert out["setting"] == knobs.complete(generic)
    head = " ".join((tmp_path / "m.c").read_text().split("*/", 1)[0].replace("*", " ").split())
    assert "use generic HC" in head and "not a significant difference, so the simpler option " \
                                       "stands" in head


def test_validate_prints_its_plan_and_a_line_per_run(two_studies):
    """Issue 32, item 4: the plan (candidates x rounds, after the warm-up) before the first run,
    the estimate once the warm-up is timed, then one line per run."""
    _, db, _, err = two_studies
    v = _validate.latest(db)
    n = len(v["candidates"])
    flat = " ".join(err.split())        # rich folds a long line at 80 columns
    plan = flat.index("validate: plan: ")
    assert flat.index(f"{n} candidates (", plan) == plan + len("validate: plan: ")
    assert flat.index(f"x {RUNS} rounds = {n * RUNS} runs", plan) > plan
    warm = flat.index("validate: warm-up run took ")
    first_run = flat.index("validate: run 1/")
    assert plan < warm < first_run
    for k in range(1, n * RUNS + 1):
        assert f"validate: run {k}/{n * RUNS} " in flat, err


def test_report_first_screen_shows_where_the_bytes_go(searched):
    """Issue 32: the report's first screen: the answer's RSS at the trace's peak split into
    its parts beside the best allocator as it comes (parts adding up to the RSS), the headroom,
    the timeline, and one line of why per knob that differs from generic, with a figure."""
    from hctune import explain
    d, db, _ = searched
    page = d / "first.html"
    hctune(db, "report", "-o", page)
    html = page.read_text()
    data = json.loads(html.split('id="hctune-data">', 1)[1].split("</script>", 1)[0])
    first = data["first"]
    assert first and first["error"] is None, first
    v = data["validation"]
    assert first["answer"] == first["entries"][0]["label"] \
        == (v.get("recommendation") or v["winner"])["candidate"]
    # beside it the best allocator as it comes (none when the answer is glibc and no other ran)
    assert len(first["entries"]) == 2 or first["answer"] == "glibc", first
    assert all(e["label"].endswith("as it comes") for e in first["entries"][1:])
    for e in first["entries"]:
        assert set(e["parts"]) == set(explain.PARTS)
        assert abs(sum(e["parts"].values()) - e["rss"]) <= explain.TOLERANCE * e["rss"], e
        assert e["curve"]
    assert first["peak_rss_over_live"] > 1
    assert 'id="parts"' in html and 'id="timeline"' in html and "Headroom" in html
    rec = v.get("recommendation") or v["winner"]
    row = next(c for c in v["candidates"] if c["candidate"] == rec["candidate"])
    changed = row.get("changed_from_generic") or {}
    if rec["allocator"] == "hc":
        assert sorted(w.split()[0] for w in first["why"]) == sorted(changed)
        for w in first["why"]:
            assert "This trace: " in w and any(ch.isdigit() for ch in w.split("This trace: ")[1])
