#!/usr/bin/env python3
"""The `hctune serve` API under load: N concurrent clients read a study's page and its trials
API (a study of 1,000 finished trials) while a writer process adds trials to it the way a worker
does, for a fixed time on loopback; prints the median and p99 latency per endpoint and the errors.

    .venv/bin/python bench/serve_load.py [--clients 50] [--seconds 30] [--trials 1000]
                                         [--client wrk|asyncio|threads] [--http-workers 1]
                                         [--db postgresql://user@host/db] [--login]

Half the clients read the page (GET /studies/load), half the trials (GET /api/studies/load/
trials, the whole list each time, no If-None-Match), each sending its next request as soon as
the last is answered, on a kept-alive connection. Clients:

- wrk (Debian's package `wrk`, the default when installed): one wrk process (one thread, C,
  epoll) per endpoint, so the load generator takes little of the CPU the server needs;
- asyncio: this script's own HTTP/1.1 client, one Python thread (the fallback without wrk);
- threads: one Python thread per client with urllib, a new connection per request (the first
  version of this benchmark: on a small machine the client threads' GIL queue inflates the
  latencies it measures).

Everything runs on this machine (server, clients, writer): on a small shared box the clients and
the server compete for the same cores, so the figures are an upper bound on the server's cost.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

NAME = "load"
PATHS = {"page": f"/studies/{NAME}", "trials": f"/api/studies/{NAME}/trials"}
TIMEOUT = 10.0   # seconds; a slower answer is an error (wrk: --timeout)
HEADERS: dict[str, str] = {}   # every client's request carries them (--login: the session)
TOKEN = "serve-load-bench-token"


def login(base: str) -> str:
    """A session cookie from the server's /login form (--login), as a browser gets one."""
    from http.cookies import SimpleCookie
    with urllib.request.urlopen(base + "/login", timeout=60) as r:
        csrf = SimpleCookie(r.headers["Set-Cookie"])["hctune_csrf"].value

    class Keep(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *a, **k):
            return None
    req = urllib.request.Request(f"{base}/login?csrf={csrf}", data=f"token={TOKEN}".encode(),
                                 headers={"Content-Type": "application/x-www-form-urlencoded",
                                          "Cookie": f"hctune_csrf={csrf}"}, method="POST")
    try:
        urllib.request.build_opener(Keep).open(req, timeout=60)
    except urllib.error.HTTPError as e:
        return "hctune_session=" + SimpleCookie(e.headers["Set-Cookie"])["hctune_session"].value
    raise SystemExit("serve_load: /login did not answer with a session")


def _get(base: str, path: str, timeout: float = 60):
    return urllib.request.urlopen(urllib.request.Request(base + path, headers=HEADERS),
                                  timeout=timeout)

# wrk prints its figures through this script (latencies in microseconds) as one JSON line.
WRK_LUA = """
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    '{"requests":%d,"median_us":%d,"p99_us":%d,"max_us":%d,"connect":%d,"read":%d,' ..
    '"write":%d,"status":%d,"timeout":%d}\\n',
    summary.requests, latency:percentile(50), latency:percentile(99), latency.max,
    e.connect, e.read, e.write, e.status, e.timeout))
end
"""


def make_study(db, trials: int, finished: bool = False) -> str:
    import optuna

    from hctune import jobs
    from hctune.db import Database
    from hctune.search.storage import default_url, open_storage
    url = default_url(db)
    with Database(db) as d:
        # a server database: the last run's study goes first
        d.query("DELETE FROM hc_queue WHERE study = :s", s=NAME)
        try:
            optuna.delete_study(study_name=NAME, storage=open_storage(url))
        except KeyError:
            pass
        qid = jobs.enqueue(d, NAME, [1], {"objective": "mem", "metric": "time",
                                          "trials": trials * 2})
        jobs.claim(d)   # running, as a worker leaves it
        if finished:    # done, with the study's row a worker writes (its report is read)
            d.query("DELETE FROM hc_studies WHERE name = :s", s=NAME)
            d.add_study(NAME, "mem", [1], url, {"metric": "time"})
            jobs.finish(d, qid)
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    st = optuna.create_study(study_name=NAME, storage=open_storage(url))
    st.add_trials([fake(i) for i in range(trials)])
    return url


def attrs(i: int) -> dict:
    return {"mem": 0.8 + (i % 100) / 500, "perf": 0.9 + (i % 37) / 100,
            "setting": f"MONITOR=0,QL_HIGH={8 * (i % 64 + 1)},SPLIT={i % 2},COALESCE=1",
            "worker": "bench:1", "constraints": [],
            "per_trace": [{"trace_id": 1, "mem_ratio": 0.9}]}


def fake(i: int):
    from optuna.distributions import IntDistribution
    from optuna.trial import TrialState, create_trial
    return create_trial(params={"QL_HIGH": 8 * (i % 64 + 1)},
                        distributions={"QL_HIGH": IntDistribution(8, 512, step=8)},
                        value=attrs(i)["mem"], state=TrialState.COMPLETE, user_attrs=attrs(i))


def writer(url: str, stop, written) -> None:
    """A worker's writes (own process): start a trial (RUNNING), set its attributes one by one,
    finish it; about five trials a second."""
    import warnings

    import optuna
    from optuna.distributions import IntDistribution

    from hctune.search.storage import open_storage
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    warnings.simplefilter("ignore")   # Optuna: heartbeats are meant for optimize()
    st = optuna.load_study(study_name=NAME, storage=open_storage(url),
                           sampler=optuna.samplers.RandomSampler(seed=1))
    i = 100000
    while not stop.is_set():
        t = st.ask({"QL_HIGH": IntDistribution(8, 512, step=8)})
        for k, v in attrs(i).items():
            t.set_user_attr(k, v)
        stop.wait(0.1)
        st.tell(t, attrs(i)["mem"])
        written.value += 1
        i += 1
        stop.wait(0.1)


# ---- clients ----

def run_wrk(base: str, clients: int, seconds: float) -> dict:
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as f:
        f.write(WRK_LUA)
    try:
        procs = {}
        for i, (k, path) in enumerate(PATHS.items()):
            n = clients // len(PATHS) + (clients % len(PATHS) if i == 0 else 0)
            procs[k] = subprocess.Popen(
                ["wrk", "-t1", f"-c{n}", f"-d{seconds:g}s", f"--timeout={TIMEOUT:g}s",
                 *(x for k, v in HEADERS.items() for x in ("-H", f"{k}: {v}")),
                 "-s", f.name, base + path], stdout=subprocess.PIPE, text=True)
        out = {}
        for k, p in procs.items():
            text, _ = p.communicate()
            line = [x for x in text.splitlines() if x.startswith("{")]
            if p.returncode != 0 or not line:
                raise SystemExit(f"serve_load: wrk failed: {text[-2000:]}")
            r = json.loads(line[-1])
            errs = r["connect"] + r["read"] + r["write"] + r["status"] + r["timeout"]
            out[k] = {"requests": r["requests"], "median_ms": round(r["median_us"] / 1e3, 1),
                      "p99_ms": round(r["p99_us"] / 1e3, 1),
                      "max_ms": round(r["max_us"] / 1e3, 1), "errors": errs}
        return out
    finally:
        os.unlink(f.name)


def summarise(lat: dict, errors: dict) -> dict:
    out = {}
    for k in PATHS:
        xs = sorted(lat[k])
        out[k] = {"requests": len(xs), "median_ms": round(statistics.median(xs) * 1e3, 1),
                  "p99_ms": round(xs[int(0.99 * (len(xs) - 1))] * 1e3, 1),
                  "max_ms": round(xs[-1] * 1e3, 1), "errors": errors[k]} if xs else \
            {"requests": 0, "errors": errors[k]}
    return out


async def _one_client(host: str, port: int, which: str, deadline: float, lat, errors):
    req = (f"GET {PATHS[which]} HTTP/1.1\r\nHost: {host}:{port}\r\n"
           + "".join(f"{k}: {v}\r\n" for k, v in HEADERS.items())
           + "Connection: keep-alive\r\n\r\n").encode()
    conn = None
    while time.monotonic() < deadline:
        t0 = time.perf_counter()
        try:
            if conn is None:
                conn = await asyncio.wait_for(asyncio.open_connection(host, port), TIMEOUT)
            r, w = conn
            w.write(req)

            async def answer():
                head = await r.readuntil(b"\r\n\r\n")
                status = int(head.split(b" ", 2)[1])
                length, close = 0, False
                for line in head.split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    name = name.strip().lower()
                    if name == b"content-length":
                        length = int(value)
                    elif name == b"connection" and value.strip().lower() == b"close":
                        close = True
                await r.readexactly(length)
                return status, close
            status, close = await asyncio.wait_for(answer(), TIMEOUT)
            lat[which].append(time.perf_counter() - t0)
            if status != 200:
                errors[which] += 1
            if close:
                w.close()
                conn = None
        except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, ValueError):
            lat[which].append(time.perf_counter() - t0)
            errors[which] += 1
            if conn is not None:
                conn[1].close()
                conn = None
    if conn is not None:
        conn[1].close()


def run_asyncio(base: str, clients: int, seconds: float) -> dict:
    host, port = base.split("//")[1].split(":")
    lat, errors = {k: [] for k in PATHS}, {k: 0 for k in PATHS}

    async def main():
        deadline = time.monotonic() + seconds
        await asyncio.gather(*(_one_client(host, int(port), list(PATHS)[i % len(PATHS)],
                                           deadline, lat, errors) for i in range(clients)))
    asyncio.run(main())
    return summarise(lat, errors)


def run_threads(base: str, clients: int, seconds: float) -> dict:
    lat, errors, lock = {k: [] for k in PATHS}, {k: 0 for k in PATHS}, threading.Lock()
    deadline = time.monotonic() + seconds

    def client():
        k = 0
        while time.monotonic() < deadline:
            which = list(PATHS)[k % len(PATHS)]
            k += 1
            t0 = time.perf_counter()
            try:
                with _get(base, PATHS[which], timeout=TIMEOUT) as r:
                    r.read()
                    ok = r.status == 200
            except (urllib.error.URLError, OSError):
                ok = False
            with lock:
                lat[which].append(time.perf_counter() - t0)
                errors[which] += not ok
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return summarise(lat, errors)


CLIENTS = {"wrk": run_wrk, "asyncio": run_asyncio, "threads": run_threads}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--trials", type=int, default=1000)
    ap.add_argument("--client", choices=list(CLIENTS), default=None,
                    help="load generator (default: wrk when installed, else asyncio)")
    ap.add_argument("--http-workers", type=int, default=1,
                    help="passed to `hctune serve --http-workers`")
    ap.add_argument("--views", action="store_true",
                    help="a quarter of the clients poll the study's history view (an SVG Optuna "
                         "draws) and a quarter one page of its trial table (finished trials by "
                         "footprint, 50 a page) instead of half reading the page and half the "
                         "trials")
    ap.add_argument("--login", action="store_true",
                    help="the server has a token and the clients send the session cookie /login "
                         "gave (each request checks the stored session)")
    ap.add_argument("--finished", action="store_true",
                    help="the study is done (no writer): half the clients read its page, half "
                         "its JSON (GET /api/studies/load, the trials in it); issue 33's "
                         "check is --finished --clients 10")
    ap.add_argument("--db", default=None,
                    help="a PostgreSQL database to run on (hctune's tables and Optuna's) instead "
                         "of a temporary SQLite file; its study 'load' is replaced")
    a = ap.parse_args()
    if a.finished:
        del PATHS["trials"]
        PATHS["study_json"] = f"/api/studies/{NAME}"
    if a.views:
        PATHS["views"] = f"/api/studies/{NAME}/views/history.svg"
        PATHS["table"] = f"/api/studies/{NAME}/table?state=complete&sort=mem_ratio&desc=false"
    kind = a.client or ("wrk" if shutil.which("wrk") else "asyncio")
    if kind == "wrk" and not shutil.which("wrk"):
        raise SystemExit("serve_load: no wrk here (Debian package wrk); try --client asyncio")
    cmd = ["bench/serve_load.py", "--clients", str(a.clients), "--seconds", f"{a.seconds:g}",
           "--trials", str(a.trials), "--client", kind, "--http-workers", str(a.http_workers),
           *(["--views"] if a.views else []), *(["--login"] if a.login else []),
           *(["--finished"] if a.finished else [])]
    if a.db:
        from hctune.db import redact
        cmd += ["--db", redact(a.db)]
    with tempfile.TemporaryDirectory() as tmp:
        db = a.db or Path(tmp) / "hctune.db"
        url = make_study(db, a.trials, a.finished)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        more = ["--http-workers", str(a.http_workers)] if a.http_workers != 1 else []
        srv = subprocess.Popen([sys.executable, "-m", "hctune", "--db", str(db), "serve",
                                "--port", str(port), "--data-dir", str(Path(tmp) / "serve"),
                                *more], start_new_session=True,
                               env={**os.environ, **({"HCTUNE_TOKEN": TOKEN} if a.login else {})})
        base = f"http://127.0.0.1:{port}"
        ctx = multiprocessing.get_context("spawn")
        stop, written = ctx.Event(), ctx.Value("i", 0)
        w = None
        try:
            for _ in range(150):
                try:
                    urllib.request.urlopen(base + "/openapi.json", timeout=2).read()
                    break
                except (urllib.error.URLError, OSError):
                    time.sleep(0.2)
            if a.login:
                HEADERS["Cookie"] = login(base)
            for _ in range(4 * a.http_workers):   # warm: each process's first read of the study
                for path in PATHS.values():
                    _get(base, path).read()
            if not a.finished:
                w = ctx.Process(target=writer, args=(url, stop, written))
                w.start()
                time.sleep(1)
            load_before = os.getloadavg()
            res = CLIENTS[kind](base, a.clients, a.seconds)
            load_after = os.getloadavg()
            stop.set()
            if w is not None:
                w.join(timeout=30)
                time.sleep(1.2)   # past the server's 1 s cache: its next read is fresh
            with _get(base, PATHS.get("trials") or PATHS["study_json"]) as r:
                raw = r.read()
            final = json.loads(raw)
            if isinstance(final, dict):
                final = final.get("trials") or []
            seen = sum(1 for t in final if t["state"] == "complete")
        finally:
            stop.set()
            if w is not None and w.is_alive():
                w.join(timeout=30)
            os.killpg(srv.pid, signal.SIGTERM)
            srv.wait(timeout=30)
    out = {"command": ".venv/bin/python " + shlex.join(cmd), "client": kind,
           "database": "postgresql" if a.db else "sqlite", "login": a.login,
           "cores": os.cpu_count(), "loadavg_1min_before_after": [load_before[0], load_after[0]],
           "clients": a.clients, "seconds": a.seconds, "trials_at_start": a.trials,
           "trials_written_during": written.value,
           "complete_trials_served_after": seen, "trials_json_bytes_after": len(raw),
           "errors": sum(r.get("errors", 0) for r in res.values()), **res}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
