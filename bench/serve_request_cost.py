#!/usr/bin/env python3
"""What one request to `hctune serve` costs inside the server, without sockets or clients: each
endpoint called through the ASGI app in this process (the floor under bench/serve_load.py's
latencies), and what reading a study's trials costs, whole (as Optuna reads a study it has not
seen) and incrementally (as the server's cache reads it each second), and what one page of the
trial table costs when made afresh after a read (its filter, sort and Pareto front).

    .venv/bin/python bench/serve_request_cost.py [--trials 1000] [--requests 300]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

import optuna

sys.path.insert(0, str(Path(__file__).resolve().parent))
import serve_load  # noqa: E402  (the same study and trials as the load benchmark)

from hctune.search.storage import open_storage  # noqa: E402
from hctune.serve.app import Config, create_app  # noqa: E402
from hctune.serve.trials import TrialsCache  # noqa: E402

ENDPOINTS = ("/studies/load", "/api/studies/load/trials", "/api/studies/load/trials?since=1000",
             "/api/studies/load?trials=false", "/api/studies/load",
             "/api/studies/load/table?state=complete&sort=mem_ratio&desc=false",
             "/studies?part=table")


async def call(app, target: str) -> int:
    path, _, query = target.partition("?")
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET",
             "scheme": "http", "path": path, "raw_path": path.encode(),
             "query_string": query.encode(), "headers": [(b"host", b"127.0.0.1")],
             "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80), "root_path": ""}
    sent = []

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        sent.append(message)
    await app(scope, receive, send)
    return sent[0]["status"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=1000)
    ap.add_argument("--requests", type=int, default=300)
    a = ap.parse_args()
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    out = {"command": f".venv/bin/python bench/serve_request_cost.py --trials {a.trials} "
                      f"--requests {a.requests}"}
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "hctune.db"
        url = serve_load.make_study(db, a.trials)
        app = create_app(Config(db, url, Path(tmp) / "data"))

        async def endpoints():
            res = {}
            for target in ENDPOINTS:
                assert await call(app, target) == 200, target   # the first read is not timed
                t0 = time.perf_counter()
                for _ in range(a.requests):
                    await call(app, target)
                res[target] = round((time.perf_counter() - t0) / a.requests * 1e6)
            return res
        out["us_per_request_in_process"] = asyncio.run(endpoints())

        storage = open_storage(url)
        t0 = time.perf_counter()
        optuna.load_study(study_name=serve_load.NAME, storage=storage).get_trials(deepcopy=False)
        out["ms_whole_read"] = round((time.perf_counter() - t0) * 1e3, 1)
        cache = TrialsCache(lambda: storage, ttl=0)
        cache.get(serve_load.NAME, "running")
        writer = optuna.load_study(study_name=serve_load.NAME, storage=open_storage(url))
        times = []
        for i in range(10):
            writer.add_trial(serve_load.fake(a.trials + i))
            t0 = time.perf_counter()
            cache.get(serve_load.NAME, "running")
            times.append(time.perf_counter() - t0)
        out["ms_incremental_read_one_new_trial"] = round(sorted(times)[len(times) // 2] * 1e3, 1)
        # one page of the trial table made afresh (as after each read): filter, sort, front
        times = []
        for i in range(10):
            writer.add_trial(serve_load.fake(a.trials + 10 + i))
            snap = cache.get(serve_load.NAME, "running")
            t0 = time.perf_counter()
            snap.table("complete", None, "", False, "mem_ratio", False, 0, 50)
            times.append(time.perf_counter() - t0)
        out["ms_table_page_fresh"] = round(sorted(times)[len(times) // 2] * 1e3, 1)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
