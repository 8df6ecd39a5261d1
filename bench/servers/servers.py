#!/usr/bin/env python3
"""Real Debian servers under their own phased load (issue 31): profile, search and validate each,
then the figures the issue asks for, beside the trace's peak live bytes.

    .venv/bin/python bench/servers/servers.py [redis] [memcached] [--trials 30] [--runs 5]
                                              [--keys N] [--dir DIR]

Per server: `hctune profile --load ... --ready ... -- SERVER`, `hctune search --objective mem
--memory-measure mean --allocators installed --trials T`, `hctune validate --runs R --top 1`
(every candidate runs the server under the same load, RSS of all its processes sampled every
100 ms). Printed: the answer's time-averaged RSS against the best allocator as it comes (the
smallest mean RSS among glibc, jemalloc, mimalloc and tcmalloc at their defaults), the load's
throughput (1 / its wall time) against the fastest candidate's, and the trace's peak live bytes.
Goal (issue 31): RSS <= 0.85x the best as it comes, throughput >= 0.95x the fastest.
Servers: redis-server (Debian's redis-server; load: redis-benchmark, bench/servers/redis_load.sh)
and memcached (load: bench/servers/memcached_load.py, the text protocol).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
HCTUNE = [sys.executable, "-m", "hctune"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def servers(keys: int) -> dict:
    p1, p2 = free_port(), free_port()
    return {
        "redis": {"argv": ["redis-server", "--port", str(p1), "--save", "", "--appendonly", "no"],
                  "ready": f"redis-cli -p {p1} ping",
                  "load": f"sh {HERE / 'redis_load.sh'} {p1} {keys} 2",
                  "needs": ["redis-server", "redis-benchmark", "redis-cli"]},
        "memcached": {"argv": ["memcached", "-p", str(p2), "-U", "0", "-l", "127.0.0.1",
                               "-m", "1024", *(["-u", "root"] if os.geteuid() == 0 else [])],
                      "ready": f"{sys.executable} -c \"import socket; "
                               f"socket.create_connection(('127.0.0.1', {p2}), 1)\"",
                      "load": f"{sys.executable} {HERE / 'memcached_load.py'} {p2} "
                              f"--keys {keys // 2} --idle 2",
                      "needs": ["memcached"]},
    }


def run(args, cwd, **kw):
    print("+ hctune " + " ".join(map(str, args)), file=sys.stderr, flush=True)
    return subprocess.run([*HCTUNE, *map(str, args)], cwd=cwd, check=True, text=True, **kw)


def figures(db, cwd, trace) -> dict:
    v = json.loads(run(["--db", db, "validate", "--runs", ARGS.runs, "--top", 1, "--json",
                        "--memory-measure", "mean"], cwd, stdout=subprocess.PIPE).stdout)
    st = json.loads(run(["--db", db, "stats", "--json", trace], cwd,
                        stdout=subprocess.PIPE).stdout)
    ok = [c for c in v["candidates"] if not c["disqualified"]]
    ans = (v.get("recommendation") or v.get("winner"))["candidate"]
    a = next(c for c in ok if c["candidate"] == ans)
    refs = [c for c in ok if c["candidate"] in ("glibc", "jemalloc", "mimalloc", "tcmalloc")]
    best = min(refs, key=lambda c: c["median"]["rss_mean_bytes"])
    fastest = min(ok, key=lambda c: c["median"]["wall_s"])
    live = st.get("max_live_bytes") or st.get("stats", {}).get("max_live_bytes")
    return {"answer": ans, "verdict": v["verdict"],
            "rss_mean": {c["candidate"]: c["median"]["rss_mean_bytes"] for c in ok},
            "rss_mean_ci": {c["candidate"]: c["ci"].get("rss_mean_bytes") for c in ok},
            "wall_s": {c["candidate"]: c["median"]["wall_s"] for c in ok},
            "out": {c["candidate"]: c["disqualified"] for c in v["candidates"]
                    if c["disqualified"]},
            "best_as_it_comes": best["candidate"],
            "rss_vs_best": a["median"]["rss_mean_bytes"] / best["median"]["rss_mean_bytes"],
            "fastest": fastest["candidate"],
            "throughput_vs_fastest": fastest["median"]["wall_s"] / a["median"]["wall_s"],
            "peak_live_bytes": live, "validation": v["validation_id"]}


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("which", nargs="*", default=["redis", "memcached"])
    ap.add_argument("--trials", type=int, default=30)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--keys", type=int, default=60000)
    ap.add_argument("--dir", default="bench-servers-out")
    ARGS = ap.parse_args()
    print("reproduce: " + " ".join([sys.executable, "bench/servers/servers.py", *sys.argv[1:]]))
    out = Path(ARGS.dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    table = {}
    for name in ARGS.which:
        s = servers(ARGS.keys)[name]
        missing = [t for t in s["needs"] if shutil.which(t) is None]
        if missing:
            print(f"{name}: skipped, not installed: {', '.join(missing)}")
            continue
        d = out / name
        d.mkdir(exist_ok=True)
        db, trace = d / "hctune.db", d / f"{name}.hct"
        run(["--db", db, "profile", "-o", trace, "--load", s["load"], "--ready", s["ready"],
             "--", *s["argv"]], d)
        run(["--db", db, "search", "--objective", "mem", "--memory-measure", "mean",
             "--allocators", "installed", "--trials", ARGS.trials, "--repeat", 1, "--seed", 1],
            d, stdout=subprocess.DEVNULL)
        table[name] = f = figures(db, d, trace)
        mib = 1 << 20
        print(f"\n{name}: answer {f['answer']} (validation #{f['validation']}); {f['verdict']}")
        print(f"  time-averaged RSS: {f['rss_mean'][f['answer']] / mib:.1f} MiB, "
              f"{f['rss_vs_best']:.2f}x {f['best_as_it_comes']} (the best as it comes; goal "
              f"<= 0.85)")
        print(f"  throughput: {f['throughput_vs_fastest']:.2f}x the fastest ({f['fastest']}; "
              f"goal >= 0.95)")
        print(f"  peak live bytes (trace): {(f['peak_live_bytes'] or 0) / mib:.1f} MiB")
        for c in sorted(f["rss_mean"], key=f["rss_mean"].get):
            lo, hi = f["rss_mean_ci"][c] or (0, 0)
            print(f"    {c:<12} mean RSS {f['rss_mean'][c] / mib:7.1f} MiB "
                  f"(CI {lo / mib:.1f}-{hi / mib:.1f})  load {f['wall_s'][c]:.2f} s")
        for c, why in f["out"].items():
            print(f"    {c:<12} out: {why}")
    (out / "figures.json").write_text(json.dumps(table, indent=2))
    print(f"\n(2 cores shared with other work; medians of {ARGS.runs} interleaved runs; "
          f"figures in {out / 'figures.json'})")


if __name__ == "__main__":
    main()
