"""Validation by real runs through `hctune serve`: a study asked with validate_runs is searched,
then its worker runs the profiled program (tests/c/validate_app.c, a few ms a run) under the
best setting, generic HC, glibc and the others, through hctune.validate (what `hctune validate`
runs); the study's JSON and page carry the verdict, the ratios with intervals and the replay's
prediction. A trace without a recorded command cannot be validated (422); a program that is gone
from the worker's machine fails the validation only."""

import shutil
import sqlite3

import pytest

from search_support import hctune, need_hc
from serve_support import Served

pytestmark = pytest.mark.timeout(240)

RUNS = 3      # hctune.validate.MIN_RUNS: intervals need several runs


@pytest.fixture(scope="module")
def app(c_program):
    return c_program("validate_app")


def test_a_study_validated_by_real_runs(app, tmp_path):
    need_hc()
    db = tmp_path / "hctune.db"
    # profiled on the server's database: hc_traces keeps the command, its directory and stdin
    hctune(db, "profile", "-o", tmp_path / "app.hct", app, "20000", cwd=tmp_path)
    gone = tmp_path / "app-gone"
    shutil.copy(app, gone)
    hctune(db, "profile", "-o", tmp_path / "gone.hct", gone, "20000", cwd=tmp_path)
    gone.unlink()                      # its program no longer exists on the worker's machine
    srv = Served(db, "--workers", 1)
    try:
        status, traces = srv.request("GET", "/api/traces")
        assert status == 200 and all(t["runnable"] for t in traces), traces
        tid, gone_id = sorted(t["id"] for t in traces)

        # a trace uploaded (profiled elsewhere): no command recorded, so no validation (and
        # nothing queued)
        hctune(tmp_path / "elsewhere.db", "profile", "-o", tmp_path / "up.hct", app, "15000",
               cwd=tmp_path)
        status, up = srv.upload((tmp_path / "up.hct").read_bytes())
        assert status == 201 and up["runnable"] is False, up
        status, err = srv.request("POST", "/api/studies", {"traces": [tid, up["id"]],
                                                           "validate_runs": RUNS})
        assert status == 422, err
        assert f"trace #{up['id']} carries no command to run" in err["error"]
        status, err = srv.request("POST", "/api/studies", {"traces": [tid], "validate_runs": 2})
        assert status == 422 and "at least 3" in err["error"], err
        assert srv.request("GET", "/api/studies")[1] == []
        status, form = srv.request("GET", "/studies")
        assert b'name="validate_runs"' in form
        assert f'value="{up["id"]}" data-runnable="0"'.encode() in form

        common = {"objective": "perf", "trials": 3, "repeat": 1, "seed": 1, "compare_rounds": 0,
                  "validate_runs": RUNS, "validate_top": 1, "allocators": ["hc"]}
        for name, t in (("val", tid), ("val-gone", gone_id)):
            status, s = srv.request("POST", "/api/studies", {"traces": [t], "name": name, **common})
            assert status == 201 and s["options"]["validate_runs"] == RUNS, s

        s = srv.wait_study("val", timeout=180)
        assert s["state"] == "done" and s["error"] is None, (s["error"], srv.output())
        v = s["validation"]
        assert v["status"] == "done" and v["error"] is None, v
        assert v["winner"]["kind"] in ("tuned", "generic") and v["verdict"]
        labels = [c["candidate"] for c in v["candidates"]]
        assert "glibc" in labels and "hc generic" in labels
        assert v["stored_runs"] == RUNS * len(labels)
        for c in v["candidates"]:
            assert c["runs"] == RUNS and c["disqualified"] is None, c
            if c["candidate"] != "glibc":
                r = c["vs_glibc"]["wall_s"]
                assert r["ci"][0] <= r["ratio"] <= r["ci"][1]
        predicted = [c for c in v["candidates"] if c["kind"] in ("tuned", "generic")
                     and c["replay"]]
        assert predicted and all(c["replay"]["perf_ratio"] > 0 for c in predicted)
        with sqlite3.connect(db) as con:
            n = con.execute("SELECT COUNT(*) FROM hc_real_runs WHERE validation_id = ?",
                            (v["id"],)).fetchone()[0]
        assert n == v["stored_runs"]
        status, page = srv.request("GET", "/studies/val")
        assert status == 200 and b"Real runs" in page and b"showValidation" in page

        s = srv.wait_study("val-gone", timeout=120)
        assert s["state"] == "done", (s, srv.output())       # the search's results stay
        assert len([t for t in s["trials"] if t["state"] == "complete"]) >= 3
        assert s["summary"]["best_perf"] is not None
        v = s["validation"]
        assert v["status"] == "failed" and "program not found" in v["error"], v
        assert "\n" not in v["error"] and v["stored_runs"] == 0
    finally:
        srv.stop()
