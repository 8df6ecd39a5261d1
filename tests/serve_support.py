"""Helpers for the `hctune serve` tests: start the real server (and workers) as subprocesses on
a free loopback port, and talk HTTP to it with the standard library."""

from __future__ import annotations

import http.client
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import optuna
from optuna.distributions import IntDistribution
from optuna.trial import TrialState, create_trial

import gate
from hctune import jobs
from hctune.db import Database
from hctune.search.storage import OWNER, default_url, open_storage
from search_support import _free_port


class Served:
    """`hctune serve` on 127.0.0.1:<free port>; stop() ends it and the workers it started."""

    def __init__(self, db, *args, env=None, log_dir: Path | None = None):
        self.db = db
        for attempt in range(5):
            # a free port, but free only until someone else binds it: a port taken in between
            # (another process, a client's outgoing connection) is tried again with another
            self.port = _free_port()
            self.base = f"http://127.0.0.1:{self.port}"
            self.log = open((log_dir or Path(db).parent) / f"serve-{self.port}.log", "w+")
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "hctune", "--db", str(db), "serve", "--port",
                 str(self.port), *map(str, args)], stdout=self.log, stderr=subprocess.STDOUT,
                env=env, start_new_session=True)
            if self._started():
                return
            if "address already in use" not in self.output().lower() or attempt == 4:
                raise AssertionError(f"serve exited {self.proc.returncode}: {self.output()}")
            self.log.close()

    def _started(self) -> bool:
        """True once it answers; False when it exited (its output says why)."""
        deadline = time.time() + 120      # a guard: it answers or exits long before
        while time.time() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                urllib.request.urlopen(self.base + "/openapi.json", timeout=2).read()
                return True
            except OSError:     # URLError, a refused or timed-out connection
                time.sleep(0.1)
        raise AssertionError(f"serve did not start: {self.output()}")

    def output(self) -> str:
        self.log.flush()
        self.log.seek(0)
        return self.log.read()[-4000:]

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.log.close()

    def request(self, method, path, body=None, headers=None, token=None, api=True):
        """(status, parsed JSON or bytes) of one request; never raises on 4xx/5xx. An API
        client's write says so (X-Requested-With: the service's CSRF rule); api=False sends
        only the given headers, as a browser's form would."""
        headers = dict(headers or {})
        if api and method not in ("GET", "HEAD"):
            headers.setdefault("X-Requested-With", "hctune-tests")
        if token:
            headers["Authorization"] = f"Bearer {token}"
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            try:
                conn.request(method, path, body, headers)
            except (BrokenPipeError, ConnectionResetError):
                # the server answered before it read the whole body (a body over the limit is
                # refused unread) and closed: its answer is still there to read
                pass
            r = conn.getresponse()
            status, ctype, data = r.status, r.getheader("content-type", ""), r.read()
            where = r.getheader("location")
        finally:
            conn.close()
        if where and (status in (301, 302, 303) or status in (307, 308) and method == "GET"):
            # followed as a browser (and urllib) would: a GET, without the body
            kept = {k: v for k, v in headers.items()
                    if k.lower() not in ("content-type", "content-length")}
            return self.request("GET", where.removeprefix(self.base), headers=kept, api=api)
        return status, (json.loads(data) if ctype.startswith("application/json") and data
                        else data)

    def upload(self, data: bytes, filename="app.trace", fmt="hctune", token=None, api=True,
               headers=None):
        boundary = secrets.token_hex(12)
        parts = [f'--{boundary}\r\nContent-Disposition: form-data; name="format"\r\n\r\n'
                 f'{fmt}\r\n'.encode(),
                 f'--{boundary}\r\nContent-Disposition: form-data; name="file"; '
                 f'filename="{filename}"\r\nContent-Type: application/octet-stream\r\n\r\n'
                 .encode(), data, f"\r\n--{boundary}--\r\n".encode()]
        return self.request("POST", "/api/traces", b"".join(parts),
                            {"Content-Type": f"multipart/form-data; boundary={boundary}",
                             **(headers or {})}, token=token, api=api)

    def wait_study(self, name, timeout=120, until=("done", "failed"), token=None) -> dict:
        deadline = time.time() + timeout
        while time.time() < deadline:
            status, s = self.request("GET", f"/api/studies/{name}", token=token)
            assert status == 200, s
            if s["state"] in until:
                return s
            time.sleep(0.5)
        raise AssertionError(f"study {name} not finished in {timeout}s: {s['state']}\n"
                             f"{self.output()}")


def stop_workers(procs):
    """End the worker processes a test started (those still running)."""
    for p in procs:
        if p.poll() is None:
            p.terminate()
            p.wait(timeout=30)


def worker(db, *args, log: Path, env=None):
    """`hctune worker` on `db`; an environment from gate.env() runs it through tests/gate.py."""
    cmd = ["--db", str(db), "worker", *map(str, args)]
    gated = env is not None and ("GATE_MEET" in env or "GATE_HANG" in env)
    return subprocess.Popen(gate.argv(*cmd) if gated else [sys.executable, "-m", "hctune", *cmd],
                            stdout=open(log, "w"), stderr=subprocess.STDOUT, env=env)


def compiles(source: bytes, tmp: Path) -> None:
    src = tmp / "malloc.c"
    src.write_bytes(source)
    r = subprocess.run([os.environ.get("CC", "cc"), "-O1", "-fPIC", "-c", str(src), "-o",
                        str(tmp / "malloc.o")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]


QL_DIST = {"QL_HIGH": IntDistribution(16, 1016, step=8)}


def fake_trial(i, state=TrialState.COMPLETE, owner=None):
    """An HC trial as a search stores it: generic as searched, QL_HIGH changed."""
    from hctune import knobs
    from hctune.search import space
    q = 16 + 8 * (i % 100)
    setting = knobs.key({**space.for_search(knobs.preset("generic")), "QL_HIGH": q})
    a = {"mem": 0.7 + (i * 37 % 50) / 100, "perf": 0.9 + (i * 11 % 30) / 100,
         "constraints": [], "setting": setting, "allocator": "hc"}
    return create_trial(params={"QL_HIGH": q}, distributions=QL_DIST, state=state,
                        value=a["mem"] if state == TrialState.COMPLETE else None,
                        user_attrs=a if state == TrialState.COMPLETE else {},
                        system_attrs={OWNER: owner} if owner else None)


def finished_db(tmp: Path) -> Path:
    """A results database (no trace file: a stand-in) holding a done study 'fin' of 30 HC
    trials, the studies `hctune search` ran 'cli-done' (15 trials), 'cli-run' (a trial
    RUNNING under this live process) and 'old/slash'."""
    db = tmp / "h.db"
    (tmp / "t.trace").write_bytes(b"x")
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    storage = open_storage(default_url(db))
    with Database(db) as d:
        tid = d.add_trace(tmp / "t.trace", "ab" * 32, command="app", events=1)
        qid = jobs.enqueue(d, "fin", [tid], {"objective": "mem", "trials": 30})
        jobs.claim(d)
        jobs.finish(d, qid)
        for name in ("fin", "cli-done", "cli-run", "old/slash"):   # (a worker adds fin's)
            d.add_study(name, "mem", [tid], default_url(db), {"metric": "time"})
    optuna.create_study(study_name="fin", storage=storage).add_trials(
        [fake_trial(i) for i in range(30)])
    optuna.create_study(study_name="cli-done", storage=storage).add_trials(
        [fake_trial(i) for i in range(15)])
    me = f"{socket.gethostname()}:{os.getpid()}:0"      # this process: alive
    optuna.create_study(study_name="cli-run", storage=storage).add_trials(
        [fake_trial(i) for i in range(4)] + [fake_trial(4, TrialState.RUNNING, owner=me)])
    return db
