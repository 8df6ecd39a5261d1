#!/usr/bin/env python3
"""The `hctune serve` API under load: N concurrent clients read a study's page and its trials
API (a study of 1,000 finished trials) while a writer adds trials to it the way a worker does,
for a fixed time on loopback; prints the median and p99 latency per endpoint and the errors.

    .venv/bin/python bench/serve_load.py [--clients 50] [--seconds 30] [--trials 1000]

Everything runs on this machine (server, clients, writer): on a small shared box the clients and
the server compete for the same cores, so the figures are an upper bound on the server's cost.
"""

from __future__ import annotations

import argparse
import json
import os
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

import optuna
from optuna.distributions import IntDistribution
from optuna.trial import TrialState, create_trial

from hctune.db import Database
from hctune.search.storage import default_url, open_storage

NAME = "load"


def make_study(db: Path, trials: int) -> str:
    with Database(db) as d:
        d.enqueue(NAME, [1], {"objective": "mem", "metric": "time", "trials": trials * 2})
        d.query("UPDATE hc_queue SET state = 'running'")
    url = default_url(db)
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    st = optuna.create_study(study_name=NAME, storage=open_storage(url))
    st.add_trials([fake(i) for i in range(trials)])
    return url


def fake(i: int):
    setting = f"MONITOR=0,QL_HIGH={8 * (i % 64 + 1)},SPLIT={i % 2},COALESCE=1"
    return create_trial(params={"QL_HIGH": 8 * (i % 64 + 1)},
                        distributions={"QL_HIGH": IntDistribution(8, 512, step=8)},
                        value=0.8 + (i % 100) / 500, state=TrialState.COMPLETE,
                        user_attrs={"mem": 0.8 + (i % 100) / 500, "perf": 0.9 + (i % 37) / 100,
                                    "setting": setting, "worker": "bench:1", "constraints": [],
                                    "per_trace": [{"trace_id": 1, "mem_ratio": 0.9}]})


def writer(url: str, stop: threading.Event, counts: dict):
    st = optuna.load_study(study_name=NAME, storage=open_storage(url))
    i = 100000
    while not stop.is_set():
        st.add_trial(fake(i))
        counts["written"] += 1
        i += 1
        stop.wait(0.2)


def client(base: str, deadline: float, out: dict, lock: threading.Lock):
    paths = {"page": f"/studies/{NAME}", "trials": f"/api/studies/{NAME}/trials"}
    k = 0
    while time.monotonic() < deadline:
        which = "page" if k % 2 == 0 else "trials"
        k += 1
        t0 = time.perf_counter()
        try:
            with urllib.request.urlopen(base + paths[which], timeout=10) as r:
                r.read()
                ok = r.status == 200
        except (urllib.error.URLError, OSError):
            ok = False
        dt = time.perf_counter() - t0
        with lock:
            out[which].append(dt)
            if not ok:
                out["errors"] += 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--trials", type=int, default=1000)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "hctune.db"
        url = make_study(db, a.trials)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        srv = subprocess.Popen([sys.executable, "-m", "hctune", "--db", str(db), "serve",
                                "--port", str(port)], start_new_session=True)
        base = f"http://127.0.0.1:{port}"
        try:
            for _ in range(100):
                try:
                    urllib.request.urlopen(base + "/openapi.json", timeout=2).read()
                    break
                except (urllib.error.URLError, OSError):
                    time.sleep(0.2)
            stop, counts = threading.Event(), {"written": 0}
            w = threading.Thread(target=writer, args=(url, stop, counts))
            w.start()
            out, lock = {"page": [], "trials": [], "errors": 0}, threading.Lock()
            deadline = time.monotonic() + a.seconds
            threads = [threading.Thread(target=client, args=(base, deadline, out, lock))
                       for _ in range(a.clients)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            stop.set()
            w.join()
        finally:
            os.killpg(srv.pid, signal.SIGTERM)
            srv.wait(timeout=30)
    res = {"clients": a.clients, "seconds": a.seconds, "trials_at_start": a.trials,
           "trials_written_during": counts["written"], "errors": out["errors"]}
    for k in ("page", "trials"):
        lat = sorted(out[k])
        res[k] = {"requests": len(lat), "median_ms": round(statistics.median(lat) * 1e3, 1),
                  "p99_ms": round(lat[int(0.99 * (len(lat) - 1))] * 1e3, 1)} if lat else None
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
