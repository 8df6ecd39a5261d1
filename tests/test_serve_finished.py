"""What a finished study cannot change is made once, over HTTP on a real server: ten clients
polling its JSON and its views build its report (its comparison) and draw each view once
(counted by GET /api/server, not timed). Studies `hctune search` ran are listed with the
trials they hold and their state (running while a live process runs one of their trials,
else done); a name with '/' is refused by the CLI and has no link."""

import csv
import io
import subprocess
import sys
import threading

import pytest

from serve_support import Served, finished_db

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    srv = Served(finished_db(tmp_path_factory.mktemp("finished")))
    yield srv
    srv.stop()


def test_a_finished_study_is_built_and_drawn_once(served):
    statuses = []

    def client():
        for path in ("/api/studies/fin", "/api/studies/fin?trials=false",
                     "/api/studies/fin/views/history.svg",
                     "/api/studies/fin"):
            statuses.append((path, served.request("GET", path)[0]))
    threads = [threading.Thread(target=client) for _ in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(s == 200 for _, s in statuses), [x for x in statuses if x[1] != 200]
    status, info = served.request("GET", "/api/server")
    c = info["counters"]
    assert c.get("report") == 1 and c.get("view") == 1, c


def test_cli_studies_say_their_trials_and_state(served):
    status, lst = served.request("GET", "/api/studies")
    by = {s["name"]: s for s in lst}
    assert by["cli-done"]["state"] == "done" and by["cli-done"]["by"] == "cli"
    assert by["cli-done"]["options"]["trials"] is None     # its --trials is not stored
    assert by["cli-run"]["state"] == "running" and by["fin"]["by"] == "service"
    status, table = served.request("GET", "/studies?part=table")
    page = table.decode()
    row = page[page.index("cli-done</a>"):]
    assert "<td class=\"n\">15</td>" in row[:row.index("</tr>")], row[:400]
    assert "/50" not in row[:row.index("</tr>")]
    assert 'href="/studies/old%2Fslash"' not in page and "old/slash</span>" in page


def test_the_cli_refuses_a_name_with_a_slash(tmp_path):
    r = subprocess.run([sys.executable, "-m", "hctune", "--db", str(tmp_path / "h.db"),
                        "search", "--study", "a/b"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "without '/'" in r.stderr and "Traceback" not in r.stderr


def test_the_answer_its_env_file_the_csv_and_a_trials_page(served):
    status, s = served.request("GET", "/api/studies/fin?trials=false")
    a = s["answer"]
    # one answer, worded as `hctune best` words it, with the files that apply it
    assert a["allocator"] == "hc" and a["said"] == ("HC (Hasan & Chang 2006), changed from "
                                                     "generic (Table 6): QL_HIGH=16"), a
    assert "not validated" in a["chosen_by"]
    assert [f["name"] for f in a["files"]][-4:] == ["hctune.env", "allocator.conf",
                                                    "Dockerfile.env", "env.line"]
    status, env = served.request("GET", "/api/studies/fin/emit/hctune.env")
    assert status == 200 and b"export LD_PRELOAD=/usr/local/lib/libhcmalloc.so" in env, env
    assert served.db.parent.as_posix().encode() not in env      # no path of the server
    # the other forms it is pasted in
    status, conf = served.request("GET", "/api/studies/fin/emit/allocator.conf")
    assert status == 200 and b'[Service]\nEnvironment="LD_PRELOAD=/usr/local/lib/libhcmalloc.so"' \
        in conf, conf
    status, docker = served.request("GET", "/api/studies/fin/emit/Dockerfile.env")
    assert b"ENV LD_PRELOAD=/usr/local/lib/libhcmalloc.so" in docker, docker
    status, line = served.request("GET", "/api/studies/fin/emit/env.line")
    assert line == b"LD_PRELOAD=/usr/local/lib/libhcmalloc.so\n", line
    status, text = served.request("GET", "/api/studies/fin/trials.csv")
    lines = text.decode().splitlines()
    assert status == 200 and lines[0].startswith("number,state,allocator,mem_ratio")
    rows = list(csv.DictReader(io.StringIO(text.decode())))
    assert len(rows) == 30 and rows[0]["changed"] == "QL_HIGH=16", rows[0]
    assert "QL_HIGH=16," in rows[0]["setting"] and float(rows[0]["mem_ratio"]) == 0.7
    status, t = served.request("GET", "/api/studies/fin/trials/3")
    assert status == 200 and t["changed"] == "QL_HIGH=40" and len(t["whole_setting"]) >= 40
    assert t["duration_s"] is not None or t["started"] is None
    assert served.request("GET", "/api/studies/fin/trials/999")[0] == 404
    status, page = served.request("GET", "/studies/fin/trials/3")
    assert status == 200 and b"The whole setting" in page and b"QL_HIGH" in page
    status, page = served.request("GET", "/studies")
    assert b'name="name" id="study-name"' in page
