"""Threaded replay (docs/replay.md, "Threaded replay"): a multi-threaded trace is replayed with
each recorded thread on a thread of its own, in its recorded order, and an op on a block another
thread allocated (or last reallocated) waits for it.  Checked on a real threaded program under
the tracer, and on written traces whose hand-offs would crash or hang a wrong replay."""

from __future__ import annotations

import os
import subprocess

import pytest

from hctune import paths, replay
from hctune.trace.writer import Writer

TIMEOUT = 120  # a deadlocked replay fails the test instead of hanging it
# tests/c/replay_threads: 4 threads x 20 rounds, ~16,000 calls.  Few: on a loaded machine (more
# runnable threads than cores) every hand-off can wait for a time slice (~1 ms), so the
# replay's time grows with the hand-offs, not the calls
ROUNDS = 20
HANDOFFS = 600  # the written traces' rounds (~2,000 hand-offs)


@pytest.fixture(scope="module")
def threaded_trace(c_program, tmp_path_factory):
    """tests/c/replay_threads traced: 4 threads handing batches of blocks round a ring (nearly
    every free and realloc of another thread's block), plus the main thread."""
    tracer = paths.BUILD / "libhctrace.so"
    if not tracer.exists():
        pytest.skip(f"{tracer} is not built; run `make` first")
    prog = c_program("replay_threads")
    trace = tmp_path_factory.mktemp("mt") / "ring.hct"
    env = dict(os.environ, LD_PRELOAD=str(tracer), HCTRACE_OUT=str(trace))
    res = subprocess.run([str(prog), str(ROUNDS)], env=env, capture_output=True, text=True,
                         timeout=TIMEOUT, check=True)
    calls = int(res.stdout.split()[1])
    return trace, calls


def _lib(name):
    lib = paths.BUILD / name
    if not lib.exists():
        pytest.skip(f"{lib} is not built; run `make` first")
    return str(lib)


@pytest.mark.parametrize("allocator", ["glibc", "hc", "debug"])
def test_real_threaded_program_replays_on_threads(threaded_trace, allocator):
    """glibc, HC (build/libhcmalloc.so) and HC's debug build, which checks every heap invariant
    after each call: the same ops, every hand-off kept, nothing failed."""
    trace, calls = threaded_trace
    alloc = {"glibc": "glibc", "hc": _lib("libhcmalloc.so"),
             "debug": _lib("libhcmalloc-debug.so")}[allocator]
    r = replay.measure(trace, alloc, repeat=2, timeout=TIMEOUT)
    # the program's own calls, plus the few stdio and the runtime make; rarely, the tracer's
    # realloc race (docs/trace-format.md, "Anomalies") leaves a skipped and a repaired call
    assert calls <= r["ops"] <= calls + 20
    assert r["skipped"] <= 4 and r["repaired"] <= 4 and r["failed"] == 0
    assert r["threads"] == r["replay_threads"] == 5
    assert r["handoffs"] > r["ops"] // 4       # most blocks change threads in this program
    assert r["clock"] == "wall" and len(r["cpu_times_ns"]) == 2
    assert r["cpu_ns_per_op"] > 0
    assert "replayed on 5 threads" in replay.summary(r)


def test_threads_off_replays_the_same_ops_on_one_thread(threaded_trace):
    trace, _ = threaded_trace
    on = replay.measure(trace, "glibc", repeat=1, timeout=TIMEOUT)
    off = replay.measure(trace, "glibc", repeat=1, timeout=TIMEOUT, threads="off")
    assert off["ops"] == on["ops"] and off["max_live_bytes"] == on["max_live_bytes"]
    assert off["replay_threads"] == 1 and off["handoffs"] == 0 and off["clock"] == "thread_cpu"
    assert "replayed in recorded order on one thread" in replay.summary(off)


def _write(path, events):
    with Writer(path, command="written") as w:
        for op, thread, *args in events:
            getattr(w, op)(*args, thread=thread)
    return path


def _replay(trace, *extra, lib=None):
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    if lib:
        env["LD_PRELOAD"] = lib
    res = subprocess.run([str(paths.BUILD / "hcreplay"), str(trace), "--repeat", "1", "--json",
                          *extra], env=env, capture_output=True, text=True, timeout=TIMEOUT)
    assert res.returncode == 0, res.stderr
    import json
    return json.loads(res.stdout)


def test_cross_thread_free_and_realloc_wait_for_the_allocation(tmp_path):
    """Blocks allocated on one thread, grown on a second, freed on a third, round and round;
    two threads freeing each other's blocks crosswise.  An op run before its block's allocation
    would free or realloc a stale pointer (glibc aborts on that); a lost hand-off hangs."""
    ev = []
    base = 0x10000
    for i in range(HANDOFFS):
        a, b, c = i % 3 + 1, (i + 1) % 3 + 1, (i + 2) % 3 + 1
        p, q = base + i * 0x1000, base + i * 0x1000 + 0x800
        ev += [("malloc", a, p, 24 + i % 200), ("realloc", b, p, q, 300 + i % 500),
               ("free", c, q)]
    x, y = 0x9000000, 0x9100000
    for i in range(HANDOFFS // 3 * 2):
        ev += [("malloc", 1, x, 40), ("malloc", 2, y, 56), ("free", 1, y), ("free", 2, x)]
    ev.insert(0, ("malloc", 0, 0x8000, 10))
    trace = _write(tmp_path / "cross.hct", ev)
    for lib in (None, _lib("libhcmalloc-debug.so")):
        r = _replay(trace, lib=lib)
        assert r["ops"] == len(ev) and r["replay_threads"] == r["threads"] == 4
        assert r["failed"] == r["skipped"] == 0
        assert r["handoffs"] == HANDOFFS * 2 + HANDOFFS // 3 * 2 * 2


def test_more_threads_than_the_replay_runs_share_threads_without_deadlock(tmp_path):
    """200 recorded threads (more than the replay's 64) passing blocks round a ring: recorded
    threads share replay threads, each keeping its order, and nothing waits forever."""
    ev = [("malloc", 0, 0x1000, 8)]
    for lap in range(5):
        for t in range(200):
            p = 0x100000 + (lap * 200 + t) * 64
            ev += [("malloc", t, p, 32), ("free", (t + 1) % 200, p)]
    trace = _write(tmp_path / "many.hct", ev)
    r = _replay(trace)
    assert r["threads"] == 200 and r["replay_threads"] == 64
    assert r["ops"] == len(ev) and r["failed"] == 0


def test_single_thread_trace_is_replayed_as_before(tmp_path):
    """One thread: the single-thread loop, its CPU time, exactly as without --threads."""
    ev = [("malloc", 0, 0x1000 + i * 64, 16 + i % 90) for i in range(500)]
    ev += [("free", 0, 0x1000 + i * 64) for i in range(0, 500, 2)]
    trace = _write(tmp_path / "one.hct", ev)
    auto, off = _replay(trace), _replay(trace, "--threads", "off")
    for r in (auto, off):
        assert r["replay_threads"] == 1 and r["clock"] == "thread_cpu" and r["handoffs"] == 0
        assert r["times_ns"] == r["cpu_times_ns"] and r["slots"] == off["slots"]
    res = subprocess.run([str(paths.BUILD / "hcreplay"), str(trace), "--threads", "maybe"],
                         capture_output=True, text=True, timeout=TIMEOUT)
    assert res.returncode == 2 and res.stderr.startswith("hcreplay: error: --threads wants")


@pytest.mark.timeout(300)
def test_search_over_a_threaded_trace_searches_the_thread_cache_knobs(threaded_trace, tmp_path):
    """`hctune search` on a real multi-threaded trace: measured on threads, and the thread-cache
    knobs (knobs.toml `threads = true`) are parameters of the study."""
    import json
    import sqlite3

    from search_support import hctune, need_hc

    need_hc()
    trace, _ = threaded_trace
    db = tmp_path / "hctune.db"
    out = json.loads(hctune(db, "search", trace, "--trials", 2, "--repeat", 1,
                             "--allocators", "hc", "--json").stdout)
    assert out["finished"] == 2 and out["failed"] == 0
    con = sqlite3.connect(db)
    params = {r[0] for r in con.execute("SELECT param_name FROM trial_params")}
    assert {"TCACHE_COUNT+1", "TCACHE_MAX"} <= params
    glibc = json.loads(con.execute("SELECT result_json FROM hc_measurements WHERE allocator ="
                                   " 'glibc'").fetchone()[0])
    assert glibc["replay_threads"] == 5 and glibc["clock"] == "wall"
