"""`hctune serve` against the attacks of issue 33, over HTTP on a real server: DNS rebinding
(a page on an attacker's name rebound to the server's address) in every mode, unknown and
mistyped fields, guessing the token, framing, the CSRF token in an address, racing creates,
HEAD. Each test failed before its fix."""

import os
import subprocess
import sys
import threading
import urllib.request
from http.cookies import SimpleCookie

import pytest

from hctune import jobs
from hctune.db import Database
from serve_support import Served

pytestmark = pytest.mark.timeout(120)

TOKEN = "a-token-of-the-attack-tests"
EVIL = "rebind.attacker.example"


def _db(tmp_path):
    db = tmp_path / "h.db"
    (tmp_path / "t.trace").write_bytes(b"x")
    with Database(db) as d:
        d.add_trace(tmp_path / "t.trace", "ab" * 32, command="app", events=1)
    return db


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    """A server without a token (the mode rebinding took over), shared by the tests that
    leave it as they found it but for studies of their own names."""
    srv = Served(_db(tmp_path_factory.mktemp("plain")), "--allowed-host", "hctune.example.org")
    yield srv
    srv.stop()


@pytest.mark.parametrize("mode", ["no-token", "token", "public-read"])
def test_dns_rebinding_is_refused_in_every_mode(tmp_path, mode, plain):
    if mode == "no-token":
        srv = plain
    else:
        srv = Served(_db(tmp_path), *(("--public-read",) if mode == "public-read" else ()),
                     "--allowed-host", "hctune.example.org",
                     env={**os.environ, "HCTUNE_TOKEN": TOKEN})
    token = None if mode == "no-token" else TOKEN
    try:
        evil = {"Host": f"{EVIL}:{srv.port}", "Origin": f"http://{EVIL}:{srv.port}"}
        study = {"traces": [1], "objective": "mem", "trials": 1, "name": "r"}
        # what a page on the rebound name sends (it would have the token in none of the
        # modes; with it, still refused: the name is checked first)
        for method, path, body in (("POST", "/api/studies", study), ("GET", "/api/studies", None),
                                   ("GET", "/studies", None), ("DELETE", "/api/traces/1", None),
                                   ("GET", "/api/traces/1", None), ("HEAD", "/studies", None)):
            for tok in (None, token):
                status, err = srv.request(method, path, body, evil, token=tok)
                assert status == 421, (method, path, status, err)
                if method != "HEAD":
                    assert "does not serve the host" in err["error"]
        assert srv.upload(b"x" * 10, headers=evil)[0] == 421
        assert srv.request("GET", "/api/studies", headers={"Host": f"{EVIL}"})[0] == 421
        # nothing was done: the trace is there and no study
        with Database(srv.db) as d:
            assert d.trace(1) is not None and jobs.job(d, "r") is None
        # the names it is bound to, and the one given, are served
        read = token if mode == "token" else None
        for host in (f"127.0.0.1:{srv.port}", f"localhost:{srv.port}", "localhost",
                     f"[::1]:{srv.port}", f"hctune.example.org:{srv.port}"):
            assert srv.request("GET", "/api/studies", headers={"Host": host},
                               token=read)[0] == 200, host
        status, s = srv.request("POST", "/api/studies", study,
                                {"Host": f"localhost:{srv.port}",
                                 "Origin": f"http://localhost:{srv.port}"}, token=token)
        assert status == 201, s
    finally:
        if srv is not plain:
            srv.stop()


def test_study_requests_refuse_unknown_fields_and_non_integers(plain):
    srv = plain
    before = len(srv.request("GET", "/api/studies")[1])
    for body, where in (({"traces": [1], "trial": 5}, "trial"),      # a typo of trials
                        ({"traces": [1], "trials": True}, "trials"),
                        ({"traces": [1], "trials": "5"}, "trials"),
                        ({"traces": [1], "trials": 5.0}, "trials"),
                        ({"traces": [True]}, "traces"),
                        ({"traces": [1], "timeout": True}, "timeout"),
                        ({"traces": [1], "validate_top": False}, "validate_top")):
        status, err = srv.request("POST", "/api/studies", body)
        assert status == 422 and err["error"].startswith(where), (body, err)
    assert len(srv.request("GET", "/api/studies")[1]) == before
    status, s = srv.request("POST", "/api/studies", {"traces": [1], "trials": 5,
                                                     "timeout": 60})
    assert status == 201 and s["options"]["trials"] == 5, s


def test_racing_creates_of_one_name(plain):
    srv = plain
    statuses, gate = [], threading.Barrier(12)

    def create():
        gate.wait()
        statuses.append(srv.request("POST", "/api/studies", {"traces": [1], "name": "same"})[0])
    threads = [threading.Thread(target=create) for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(statuses) == [201] + [409] * 11, statuses


def test_a_short_token_is_refused(tmp_path):
    r = subprocess.run([sys.executable, "-m", "hctune", "--db", str(tmp_path / "h.db"),
                        "serve"], env={**os.environ, "HCTUNE_TOKEN": "x"},
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "at least 16" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


def test_token_guessing_is_limited_and_headers_and_head(tmp_path):
    srv = Served(_db(tmp_path), env={**os.environ, "HCTUNE_TOKEN": TOKEN,
                                     "HCTUNE_LOGIN_ATTEMPTS": "4"})
    try:
        form = {"Content-Type": "application/x-www-form-urlencoded"}
        with urllib.request.urlopen(srv.base + "/login") as r:
            csrf = SimpleCookie(r.headers["Set-Cookie"])["hctune_csrf"].value
            page = r.read().decode()
            headers = r.headers
        # the page is not to be framed, sniffed or named to other sites
        assert "frame-ancestors 'none'" in headers["Content-Security-Policy"]
        assert headers["X-Content-Type-Options"] == "nosniff"
        assert headers["Referrer-Policy"] == "same-origin"
        assert "csrf=" not in page and f'name="csrf" value="{csrf}"' in page
        cookie = {**form, "Cookie": f"hctune_csrf={csrf}"}
        for i in range(3):
            status, _ = srv.request("POST", "/login", f"csrf={csrf}&token=guess{i}".encode(),
                                    cookie, api=False)
            assert status == 403
        assert srv.request("GET", "/api/studies", token="guess-by-bearer")[0] == 403
        # four wrong: the right token waits too (no guess is tried)
        conn_status, err = srv.request("POST", "/login", f"csrf={csrf}&token={TOKEN}".encode(),
                                       cookie, api=False)
        assert conn_status == 429 and "try again" in err["error"], err
        import http.client
        c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)
        c.request("GET", "/api/studies", headers={"Authorization": f"Bearer {TOKEN}"})
        r = c.getresponse()
        r.read()
        assert r.status == 429 and 1 <= int(r.getheader("Retry-After")) <= 60
        assert r.getheader("X-Content-Type-Options") == "nosniff"
        c.close()
        # HEAD is answered as GET, without a body
        c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)
        c.request("HEAD", "/login")
        r = c.getresponse()
        assert r.status == 200 and r.read() == b"" and \
            r.getheader("Content-Type").startswith("text/html")
        c.close()
    finally:
        srv.stop()
