"""`hctune serve` as an attacker meets it, over HTTP on a real server: the token checked before
a byte of an upload is read, uploads stopped at the limit (Content-Length and chunked), every
number checked, a list no stored row can break, forged (cross-site) writes refused, reads
guarded by the token, a session cookie that is not the token."""

import json
import os
import select
import socket
import sqlite3
import time
import urllib.request
from http.cookies import SimpleCookie

import pytest

from hctune.db import Database
from serve_support import Served

pytestmark = pytest.mark.timeout(180)

TOKEN = "s3cret-token-for-tests"
MiB = 1 << 20


def io_counts(pid: int) -> dict:
    """The server process's I/O counters (/proc/PID/io): rchar counts every byte it read,
    sockets included; write_bytes what it sent towards the disk."""
    with open(f"/proc/{pid}/io") as f:
        return {k: int(v) for k, v in (line.split(": ") for line in f)}


def chunked_upload(port: int, total: int, headers: dict) -> tuple[int, int]:
    """POST /api/traces a multipart body of `total` zero bytes with Transfer-Encoding: chunked
    on a raw socket, stopping as soon as an answer comes (or the server closes); returns
    (status, bytes sent)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    s.sendall(f"POST /api/traces HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
              "Transfer-Encoding: chunked\r\nContent-Type: multipart/form-data; boundary=BND\r\n"
              f"X-Requested-With: tests\r\n{head}\r\n".encode())
    pre = b'--BND\r\nContent-Disposition: form-data; name="file"; filename="x"\r\n\r\n'
    s.sendall(b"%x\r\n%s\r\n" % (len(pre), pre))
    sent, block = 0, b"\0" * (256 << 10)
    try:
        while sent < total:
            if select.select([s], [], [], 0)[0]:
                break
            s.sendall(b"%x\r\n%s\r\n" % (len(block), block))
            sent += len(block)
    except (BrokenPipeError, ConnectionResetError):
        pass
    s.settimeout(30)
    data = b""
    try:
        while b"\r\n" not in data:
            more = s.recv(4096)
            if not more:
                break
            data += more
    except ConnectionResetError:
        pass
    s.close()
    return int(data.split()[1]) if data.startswith(b"HTTP/") else 0, sent


def test_uploads_are_guarded_before_they_are_read(tmp_path):
    data = tmp_path / "data"
    srv = Served(tmp_path / "h.db", "--max-upload", 1, "--data-dir", data,
                 env={**os.environ, "HCTUNE_TOKEN": TOKEN})
    try:
        pid = srv.proc.pid
        # no token: 401 while the client is still sending, and the body is not read
        before = io_counts(pid)
        status, sent = chunked_upload(srv.port, 300 * MiB, {})
        after = io_counts(pid)
        assert status == 401
        assert sent < 64 * MiB, sent
        assert after["rchar"] - before["rchar"] < 2 * MiB
        assert after["write_bytes"] - before["write_bytes"] < MiB
        assert not any(data.rglob("*"))  or not any((data / "tmp").iterdir())
        # with the token, over the 1 MiB limit: stopped there, not after the whole body
        before = io_counts(pid)
        status, sent = chunked_upload(srv.port, 300 * MiB,
                                      {"Authorization": f"Bearer {TOKEN}"})
        after = io_counts(pid)
        assert status == 413
        assert sent < 64 * MiB, sent
        assert after["rchar"] - before["rchar"] < 4 * MiB
        assert after["write_bytes"] - before["write_bytes"] <= 2 * MiB
        assert not any((data / "tmp").iterdir())
        assert not any((data / "traces").iterdir())
        # a Content-Length over the limit: refused before a byte of the body is read
        status, err = srv.request("POST", "/api/traces", b"\0" * (MiB + (256 << 10)),
                                  {"Content-Type": "multipart/form-data; boundary=x"},
                                  token=TOKEN)
        assert status == 413 and "limit" in err["error"]
    finally:
        srv.stop()


def test_every_number_is_checked_and_no_stored_row_breaks_a_list(tmp_path):
    db = tmp_path / "h.db"
    srv = Served(db)
    try:
        for body in (b'{"traces": [1], "timeout": 1e400}', b'{"traces": [1], "timeout": NaN}',
                     b'{"traces": [9223372036854775808]}', b'{"traces": [1], "seed": 4294967296}',
                     b'{"traces": [1], "trials": 0}', b'{"traces": [1], "repeat": 1.5}',
                     b'{"traces": [1], "max_slowdown": -1}', b'{"traces": [1], "trials": 1e9}'):
            status, err = srv.request("POST", "/api/studies", body,
                                      {"Content-Type": "application/json"})
            assert status == 422 and "error" in err, (body, status, err)
        status, err = srv.request("POST", "/studies", b"traces=1&timeout=inf",
                                  {"Content-Type": "application/x-www-form-urlencoded"})
        assert status == 422, err
        for path in ("/api/traces/18446744073709551616", "/traces/99999999999999999999",
                     "/api/studies/x/trials?since=99999999999999999999",
                     "/api/studies/x/emit/malloc.c?trial=99999999999999999999"):
            status, err = srv.request("GET", path)
            assert status == 422 and "error" in err, (path, status, err)
        assert srv.request("GET", "/api/studies") == (200, [])
        # rows no request can make any more (an older version, a hand edit): the list stands
        with sqlite3.connect(db) as c:
            cols = [r[1] for r in c.execute("PRAGMA table_info(hc_queue)")]
            base = {"state": "queued", "created": "2026-01-01T00:00:00+00:00",
                    "trace_ids": "[1]"}
            for name, options in (("inf", '{"timeout": Infinity, "trials": 5}'),
                                  ("garbage", "{not json"), ("list", "[1, 2]")):
                row = {**base, "study": name, "options_json": options}
                row = {k: v for k, v in row.items() if k in cols}
                c.execute(f"INSERT INTO hc_queue ({', '.join(row)}) VALUES "
                          f"({', '.join('?' * len(row))})", list(row.values()))
        status, lst = srv.request("GET", "/api/studies")
        assert status == 200 and {s["name"] for s in lst} == {"inf", "garbage", "list"}
        assert next(s for s in lst if s["name"] == "inf")["options"]["timeout"] is None
        for path in ("/studies", "/studies/garbage", "/api/studies/inf", "/api/studies/list"):
            assert srv.request("GET", path)[0] == 200, path
        # the API's page works offline (nothing from a CDN); one error shape, the router's too
        status, page = srv.request("GET", "/docs")
        assert status == 200 and b"/api/studies" in page and b"https://" not in page
        assert srv.request("GET", "/redoc") == (404, {"error": "Not Found"})
        assert srv.request("PUT", "/api/studies", {})[1] == {"error": "Method Not Allowed"}
        # ... and the OpenAPI document describes that shape for every error it lists
        spec = srv.request("GET", "/openapi.json")[1]
        schemas = spec["components"]["schemas"]
        error = schemas["Error"]
        assert error["required"] == ["error"] and error["properties"]["error"]["type"] == "string"
        assert "HTTPValidationError" not in schemas and "detail" not in json.dumps(spec)
        errors = 0
        for path, ops in spec["paths"].items():
            for method, op in ops.items():
                codes = {c for c in op["responses"] if c[0] in "45"}
                assert {"401", "403", "422"} <= codes, (method, path)
                for code in codes:
                    ref = op["responses"][code]["content"]["application/json"]["schema"]["$ref"]
                    assert ref == "#/components/schemas/Error", (method, path, code)
                    errors += 1
        assert errors > 50
        status, err = srv.request("POST", "/api/studies", {"traces": "x"})
        assert status == 422 and set(err) == set(error["properties"]), err
    finally:
        srv.stop()


def test_forged_writes_are_refused(tmp_path):
    Database(tmp_path / "h.db").close()
    (tmp_path / "t.trace").write_bytes(b"x")
    with Database(tmp_path / "h.db") as d:
        d.add_trace(tmp_path / "t.trace", "ef" * 32, command="app", events=1)
    srv = Served(tmp_path / "h.db")
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    try:
        # a form posted from anywhere (no CSRF token, no header an API client sends)
        status, err = srv.request("POST", "/studies", b"traces=1", form, api=False)
        assert status == 403 and "CSRF" in err["error"]
        status, err = srv.upload(b"x" * 100, api=False)
        assert status == 403
        # from another origin, or another port of this one, even with a header
        for h in ({"Origin": "http://evil.example"},
                  {"Origin": f"http://127.0.0.1:{srv.port + 1}"},
                  {"Sec-Fetch-Site": "same-site"}, {"Origin": "null"}):
            status, err = srv.request("POST", "/api/studies", {"traces": [1]}, h)
            assert status == 403 and "origin" in err["error"], (h, err)
        # the service's own form: its page sets the cookie and puts the token in the action
        with urllib.request.urlopen(srv.base + "/traces") as r:
            cookie = SimpleCookie(r.headers["Set-Cookie"])["hctune_csrf"].value
            page = r.read().decode()
        # in a field of the form, never in its address (logs and Referer headers keep those)
        assert f'<input type="hidden" name="csrf" value="{cookie}">' in page
        assert "csrf=" not in page
        status, page = srv.request("POST", "/studies",
                                   f"csrf={cookie}&traces=1&trials=7&timeout=inf".encode(),
                                   {**form, "Cookie": f"hctune_csrf={cookie}"}, api=False)
        # past the CSRF check: the form again, its error beside it and its input kept
        assert status == 422 and b'id="form-error"' in page and b"timeout" in page
        assert b'value="7"' in page and b'value="inf"' in page
        status, page = srv.request("POST", "/studies", f"traces=99&csrf={cookie}".encode(),
                                   {**form, "Cookie": f"hctune_csrf={cookie}"}, api=False)
        assert status == 404 and b"no trace #99" in page
        status, err = srv.request("POST", "/studies", b"csrf=other&traces=1",
                                  {**form, "Cookie": f"hctune_csrf={cookie}"}, api=False)
        assert status == 403
    finally:
        srv.stop()


def test_the_token_guards_reads_and_the_cookie_is_a_session(tmp_path):
    srv = Served(tmp_path / "h.db", env={**os.environ, "HCTUNE_TOKEN": TOKEN})
    try:
        assert srv.request("GET", "/api/studies")[0] == 401
        assert srv.request("GET", "/api/traces", token="wrong")[0] == 403
        assert srv.request("GET", "/api/studies", token=TOKEN) == (200, [])
        req = urllib.request.Request(srv.base + "/studies", headers={"Accept": "text/html"})
        opener = urllib.request.build_opener(NoRedirect)
        with pytest.raises(urllib.error.HTTPError) as e:
            opener.open(req)
        assert e.value.code == 303 and e.value.headers["Location"] == "/login"
        # log in through the form: the cookie is a signed session id, not the token
        cookie = _login(srv)
        session = cookie["Cookie"].removeprefix("hctune_session=")
        assert TOKEN not in session and session
        assert srv.request("GET", "/api/studies", headers=cookie) == (200, [])
        forged = session.rsplit(".", 1)[0] + ".0" * 8
        assert srv.request("GET", "/api/studies", headers={"Cookie":
                                                           f"hctune_session={forged}"})[0] == 403
        status, _ = srv.request("POST", "/logout", b"", cookie)
        assert status in (200, 303)
        # as an attacker who copied the cookie before the logout: the session is gone from the
        # server, so the copy is refused (401: log in again) and a page goes to /login
        assert srv.request("GET", "/api/studies", headers=cookie)[0] == 401
        assert srv.request("POST", "/api/studies", {"traces": [1]}, headers=cookie)[0] == 401
        req = urllib.request.Request(srv.base + "/studies",
                                     headers={"Accept": "text/html", **cookie})
        with pytest.raises(urllib.error.HTTPError) as e:
            opener.open(req)
        assert e.value.code == 303 and e.value.headers["Location"] == "/login"
        # the OpenAPI document says how to authenticate
        spec = srv.request("GET", "/openapi.json")[1]
        assert spec["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
    finally:
        srv.stop()
    srv = Served(tmp_path / "h.db", "--public-read", env={**os.environ, "HCTUNE_TOKEN": TOKEN})
    try:
        assert srv.request("GET", "/api/studies") == (200, [])
        assert srv.request("GET", "/api/studies/x/emit/malloc.c")[0] == 401
        assert srv.request("POST", "/api/studies", {"traces": [1]})[0] == 401
    finally:
        srv.stop()


def _login(srv) -> dict:
    """The Cookie header of a session opened through the /login form."""
    with urllib.request.urlopen(srv.base + "/login") as r:
        csrf = SimpleCookie(r.headers["Set-Cookie"])["hctune_csrf"].value
    req = urllib.request.Request(
        f"{srv.base}/login", data=f"csrf={csrf}&token={TOKEN}".encode(), method="POST",
        headers={"Content-Type": "application/x-www-form-urlencoded",
                 "Cookie": f"hctune_csrf={csrf}"})
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.build_opener(NoRedirect).open(req)
    assert e.value.code == 303
    return {"Cookie": "hctune_session="
            + SimpleCookie(e.value.headers["Set-Cookie"])["hctune_session"].value}


class Clock:
    """A settable clock for hctune.serve.state.Service (wall and monotonic alike)."""

    def __init__(self, now: float = 1_800_000_000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


class CookieRequest:
    """What Service.session_cookie reads of a request: its cookies."""

    def __init__(self, cookie: str):
        self.cookies = {"hctune_session": cookie}


def test_sessions_expire_and_end_in_every_server_process(tmp_path, monkeypatch):
    """A session lasts HCTUNE_SESSION_SECONDS (on the service's injected clock, no waiting);
    a logout answered by one server process ends the session in another sharing the stored
    sessions once that one's one-second belief in a session it read is over (injected clocks
    for the expiry; the logout through `--http-workers 2`'s processes over HTTP, below)."""
    from hctune.serve.state import SESSION_CHECK_SECONDS, Config, Service
    monkeypatch.setenv("HCTUNE_SESSION_SECONDS", "4")
    db = tmp_path / "c.db"
    Database(db).close()
    wall, mono = Clock(), Clock(100.0)
    services = [Service(Config(db, f"sqlite:///{tmp_path / 'o.db'}", tmp_path / f"d{i}",
                               token=TOKEN), clock=wall, monotonic=mono) for i in range(2)]
    cookie = services[0].new_session()
    sid = cookie.rsplit(".", 1)[0]
    assert all(s.session_cookie(CookieRequest(cookie)) == sid for s in services)
    assert services[0].session_cookie(CookieRequest(cookie + "x")) is None   # signature
    wall.now += 3.9
    mono.now += 3.9
    assert services[1].session_cookie(CookieRequest(cookie)) == sid
    wall.now += 0.2                 # 4.1 s after the login: expired, believed or not
    assert all(s.session_cookie(CookieRequest(cookie)) is None for s in services)

    cookies = [services[0].new_session() for _ in range(2)]
    assert all(s.session_cookie(CookieRequest(c)) for s in services for c in cookies)
    assert services[0].end_session(CookieRequest(cookies[0]))
    assert services[0].session_cookie(CookieRequest(cookies[0])) is None
    mono.now += SESSION_CHECK_SECONDS * 0.9    # the other still believes what it read...
    assert services[1].session_cookie(CookieRequest(cookies[0]))
    mono.now += SESSION_CHECK_SECONDS * 0.2    # ...for a second
    assert services[1].session_cookie(CookieRequest(cookies[0])) is None
    assert all(s.session_cookie(CookieRequest(cookies[1])) for s in services)

    # over HTTP: whichever of the two processes answers, the logout holds (a server whose
    # sessions last the default 12 h, so that no clock but the processes' belief is in it)
    srv = Served(tmp_path / "h.db", "--http-workers", 2,
                 env={**os.environ, "HCTUNE_TOKEN": TOKEN})
    try:
        cookies = [_login(srv) for _ in range(2)]
        assert srv.request("POST", "/logout", b"", cookies[0])[0] in (200, 303)
        time.sleep(1.1)   # a process believes a session it read for a second
        for _ in range(6):  # whichever process answers
            assert srv.request("GET", "/api/studies", headers=cookies[0])[0] == 401
        assert srv.request("GET", "/api/studies", headers=cookies[1]) == (200, [])
    finally:
        srv.stop()


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *a, **k):
        return None


def _raw(srv, head: bytes, pieces=(), pause=0.0, timeout=30) -> bytes:
    """Send a request by hand (headers, then the body's pieces with a pause between them) and
    read the answer; the server may answer and close before the body is all sent."""
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=timeout)
    try:
        s.sendall(head)
        for p in pieces:
            try:
                s.sendall(p)
            except OSError:       # answered and closed already
                break
            time.sleep(pause)
        out = b""
        while b"\r\n\r\n" not in out:
            got = s.recv(65536)
            if not got:
                break
            out += got
        return out
    finally:
        s.close()


def test_huge_trickled_and_nested_bodies(tmp_path):
    """A write's body (JSON, a form) is read by the guard: at most 1 MiB (413, by Content-Length
    or counted in a chunked body), within HCTUNE_BODY_SECONDS (408); a deeply nested JSON is a
    4xx; unicode in names and paths is a one-line 4xx."""
    srv = Served(tmp_path / "h.db", "--data-dir", tmp_path / "data",
                 env={**os.environ, "HCTUNE_BODY_SECONDS": "2",
                      "HCTUNE_UPLOAD_IDLE_SECONDS": "1"})
    try:
        post = (b"POST /api/studies HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n")
        out = _raw(srv, post + b"Content-Length: 2000000000\r\n\r\n", [b"{"])
        assert out.startswith(b"HTTP/1.1 413"), out
        chunk = b"%x\r\n%s\r\n" % (65536, b" " * 65536)
        out = _raw(srv, post + b"Transfer-Encoding: chunked\r\n\r\n", [chunk] * 64)
        assert out.startswith(b"HTTP/1.1 413"), out
        started = time.time()
        out = _raw(srv, post + b"Content-Length: 100\r\n\r\n", [b'{"traces"'] * 5, pause=1.0)
        assert out.startswith(b"HTTP/1.1 408") and time.time() - started < 15, out
        for body in (b"[" * 100000 + b"]" * 100000, b'{"traces": ' + b"[" * 5000 + b"]" * 5000
                     + b"}"):
            status, err = srv.request("POST", "/api/studies", body,
                                      {"Content-Type": "application/json"})
            assert status in (400, 422) and "\n" not in err["error"], (status, err)
        status, err = srv.request("POST", "/api/studies", {"traces": [1], "name": "ünï\u202e😀"})
        assert status == 422 and "name" in err["error"], err
        status, err = srv.request("GET", "/api/studies/%F0%9F%98%80%E2%80%AE")
        assert status == 404 and err["error"].startswith("no study named"), err
        # an upload that stops halfway: taken as gone after HCTUNE_UPLOAD_IDLE_SECONDS, and its
        # part of the file removed
        up = (b"POST /api/traces HTTP/1.1\r\nHost: localhost\r\nX-Requested-With: t\r\n"
              b"Content-Type: multipart/form-data; boundary=bb\r\nContent-Length: 100000\r\n\r\n")
        first = (b'--bb\r\nContent-Disposition: form-data; name="file"; filename="t"\r\n\r\n'
                 + b"x" * 5000)
        started = time.time()
        out = _raw(srv, up, [first], pause=4.0)
        assert out.startswith(b"HTTP/1.1 408") and time.time() - started < 15, out
        assert not any((tmp_path / "data" / "tmp").iterdir())
        assert srv.request("GET", "/api/studies") == (200, [])      # the server is still fine
    finally:
        srv.stop()
