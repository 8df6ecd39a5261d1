"""`hctune serve` over HTTP: a real server on a loopback port, a real trace (gawk under the
LD_PRELOAD tracer), a worker that runs the study, and the tuned malloc.c that comes back."""

import subprocess
import sys

import pytest

import gate
from search_support import need_hc, record_gawk_trace
from serve_support import Served, compiles, stop_workers, worker

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    need_hc()
    return record_gawk_trace(tmp_path_factory.mktemp("trace") / "gawk.trace")


def test_upload_study_worker_emit(trace, tmp_path):
    srv = Served(tmp_path / "hctune.db", "--workers", 1)
    try:
        status, t = srv.upload(trace.read_bytes())
        assert status == 201, t
        assert t["events"] > 0 and "gawk" in t["program"]
        status, lst = srv.request("GET", "/api/traces")
        assert status == 200 and [x["id"] for x in lst] == [t["id"]]
        status, s = srv.request("POST", "/api/studies",
                                {"traces": [t["id"]], "objective": "mem", "trials": 3,
                                 "name": "api", "allocators": ["hc"]})
        assert status == 201 and s["state"] == "queued", s
        s = srv.wait_study("api")
        assert s["state"] == "done", s
        done = [x for x in s["trials"] if x["state"] == "complete"]
        assert len(done) >= 3 and all(x["mem_ratio"] > 0 for x in done)
        best = s["summary"]["best_mem"]
        assert best["mem_ratio"] == min(x["mem_ratio"] for x in done if x["feasible"])
        # the answer, decided where best, emit and report decide it (search.answer)
        assert s["answer"]["trial"] == best["trial"] and "not validated" in s["answer"]["chosen_by"]
        names = {a["allocator"] for a in s["comparison"][0]["allocators"]}
        assert {"glibc", "hc tuned"} <= names and len(names) >= 3, names  # + the others here
        status, src = srv.request("GET", "/api/studies/api/emit/malloc.c")
        knob, value = best["setting"].split(",")[1].split("=")
        assert status == 200 and f"\n#define {knob} {value}\n".encode() in src  # best's own value
        compiles(src, tmp_path)
        status, src1 = srv.request("GET", f"/api/studies/api/emit/malloc.c?trial={done[1]['number']}")
        assert status == 200 and b"trial" in src1
        for f in ("malloc.mk", "hcmalloc.cmake", "libhcmalloc.so"):
            status, body = srv.request("GET", f"/api/studies/api/emit/{f}")
            assert status == 200 and body, f
        assert body[:4] == b"\x7fELF"
        status, page = srv.request("GET", "/api/studies/api/report.html")
        assert status == 200 and page.count(b"<svg") >= 2
        for path in ("/studies", "/traces", f"/traces/{t['id']}", "/studies/api"):
            status, page = srv.request("GET", path)
            assert status == 200 and b"hctune" in page, path
        status, spec = srv.request("GET", "/openapi.json")
        assert {"/api/traces", "/api/studies", "/api/studies/{name}/trials",
                "/api/studies/{name}/emit/{file}"} <= set(spec["paths"])
    finally:
        srv.stop()


def test_a_cross_allocator_study(trace, tmp_path):
    """allocators and memory_measure through the API (the options of `hctune search`): names
    checked by the server, "installed" expanded by the worker on its machine, seeds at most
    three quarters of the trials across the allocators, each trial's allocator shown."""
    srv = Served(tmp_path / "hctune.db")
    # a worker started by hand, held at its second trial (tests/gate.py) while the test reads
    # /api/workers: the trial it measures is there
    held = tmp_path / "held"
    procs = [worker(tmp_path / "hctune.db", log=tmp_path / "worker.log",
                    env=gate.env(hang=("trial:2", held)))]
    try:
        status, t = srv.upload(trace.read_bytes())
        assert status == 201, t
        for bad, why in (({"allocators": ["hc", "nosuch"]}, "unknown allocator 'nosuch'"),
                         ({"allocators": ["installed", "hc"]}, "stands alone"),
                         ({"allocators": []}, "allocators"),
                         ({"allocators": ["x" * 100]}, "allocators"),
                         ({"memory_measure": "most"}, "memory_measure")):
            status, err = srv.request("POST", "/api/studies", {"traces": [t["id"]], **bad})
            assert status == 422 and why in err["error"], (bad, err)
            assert "\n" not in err["error"]
        status, s = srv.request("POST", "/api/studies", {
            "traces": [t["id"]], "trials": 4, "compare_rounds": 0, "name": "cross",
            "memory_measure": "final", "repeat": 1})
        assert status == 201, s
        # no allocators named: the default (HC and every one installed on the worker)
        assert s["options"]["allocators"] == ["installed"]
        assert s["options"]["memory_measure"] == "final"
        gate.wait_for(held, *procs, what="the worker's second trial")
        (w,) = srv.request("GET", "/api/workers")[1]
        assert (w["state"], w["study"], w["trial"]) == ("running", "cross", 1), w
        gate.release(held)
        s = srv.wait_study("cross")
        assert s["state"] == "done", (s, srv.output())
        done = [x for x in s["trials"] if x["state"] == "complete"]
        # the sampled one may be pruned once it has lost (search/study.py): it still counts
        assert len(done) + sum(1 for x in s["trials"] if x["state"] == "pruned") == 4
        assert {"hc", "glibc"} <= {x["allocator"] for x in s["trials"]}, s["trials"]
        assert sum(1 for x in s["trials"] if x["seed"]) <= 3      # 3/4 of 4 trials
        status, page = srv.request("GET", "/studies/cross")
        assert status == 200 and b'data-key="allocator"' in page
        # the allocators as asked and as the worker expanded them; mem is the final RSS
        used = s["allocators_searched"]
        assert used[0] == "hc" and "glibc" in used and "installed" not in used, used
        assert f'<span id="allocators">installed: {", ".join(used)}</span>'.encode() in page
        assert s["memory"] == "final RSS" and b"final RSS vs glibc" in page
        # a trial of another allocator: its environment file, no malloc.c
        by = {x["allocator"]: x["number"] for x in done}
        status, env = srv.request("GET", f"/api/studies/cross/emit/hctune.env?trial={by['glibc']}")
        assert status == 200 and b"glibc" in env, env
        status, err = srv.request("GET", f"/api/studies/cross/emit/malloc.c?trial={by['glibc']}")
        assert status == 409 and "hctune.env" in err["error"], err
        # HC's answer has its env file too (issue 33), naming the installed download
        status, env = srv.request("GET", f"/api/studies/cross/emit/hctune.env?trial={by['hc']}")
        assert status == 200 and b"export LD_PRELOAD=/usr/local/lib/libhcmalloc.so" in env, env
        assert srv.request("GET", f"/api/studies/cross/emit/malloc.c?trial={by['hc']}")[0] == 200
        # the form takes them too, and keeps them when it refuses
        form = (f"traces={t['id']}&allocators=hc&allocators=glibc&memory_measure=final"
                "&trials=2&name=x").encode()
        status, page = srv.request("POST", "/studies", form.replace(b"glibc", b"nosuch"),
                                   {"Content-Type": "application/x-www-form-urlencoded"})
        assert status == 422 and b"unknown allocator" in page and b'value="hc" checked' in page
    finally:
        stop_workers(procs)
        srv.stop()


def test_bad_input_is_4xx_and_stores_nothing(trace, tmp_path):
    token = "s3cret-token-for-the-api"
    db = tmp_path / "hctune.db"
    srv = Served(db, "--token", token, "--max-upload", 1, "--data-dir", tmp_path / "data")
    try:
        good = trace.read_bytes()
        assert srv.upload(good)[0] == 401                      # no token
        assert srv.upload(good, token="wrong")[0] == 403       # wrong token
        status, err = srv.upload(b"not a trace at all" * 100, token=token)
        assert status == 400 and "magic" in err["error"] and str(tmp_path) not in err["error"]
        status, err = srv.upload(good[:len(good) // 2], token=token)   # truncated
        assert status == 400, err
        status, err = srv.upload(b"\0" * ((1 << 20) + (256 << 10)), token=token)   # over 1 MiB
        assert status == 413, err
        status, err = srv.upload(b"", token=token)
        assert status == 400, err
        status, err = srv.upload(b"+ 0x10 zz\n", fmt="text", token=token)
        assert status == 400, err
        status, err = srv.upload(good, fmt="../../x", token=token)
        assert status == 400, err
        status, err = srv.request("POST", "/api/studies", {"traces": [7], "trials": 3},
                                  token=token)
        assert status == 404 and "no trace #7" in err["error"]
        status, err = srv.request("POST", "/api/studies", {"traces": [7], "trials": 3})
        assert status == 401
        status, err = srv.request("POST", "/api/studies", b"{not json",
                                  {"Content-Type": "application/json"}, token=token)
        assert status == 422 and "error" in err
        assert srv.request("GET", "/api/studies/nothere/emit/malloc.c", token=token)[0] == 404
        assert srv.request("GET", "/api/studies/nothere/emit/malloc.c")[0] == 401
        # nothing stored by any of that (and with a token, reads need it too)
        assert srv.request("GET", "/api/traces")[0] == 401
        assert srv.request("GET", "/api/traces", token=token)[1] == []
        assert srv.request("GET", "/api/studies", token=token)[1] == []
        assert not any((tmp_path / "data").rglob("*.trace"))
        assert not any((tmp_path / "data" / "tmp").iterdir())
        # a path-like file name: stored under the server's own name, inside its directory
        status, t = srv.upload(good, filename="../../../../etc/evil.trace", token=token)
        assert status == 201, t
        assert srv.upload(good, token=token)[0] == 200     # the same trace again: not created
        stored = list((tmp_path / "data" / "traces").iterdir())
        assert [p.name for p in stored] == [f"{t['sha256']}.trace"]
        assert not (tmp_path / "evil.trace").exists()
    finally:
        srv.stop()


def test_other_address_needs_a_token(tmp_path):
    r = subprocess.run([sys.executable, "-m", "hctune", "--db", str(tmp_path / "h.db"), "serve",
                        "--host", "0.0.0.0"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stderr.startswith("hctune: error:") and "--token" in r.stderr
