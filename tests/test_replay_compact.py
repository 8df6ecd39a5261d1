"""The replay's in-memory form (issue 23): 8 bytes per op, so a trace of a billion events
replays in 8 GB.  Sizes below 16 MiB sit in the op; memalign's (size, alignment) and bigger
sizes go through a table of distinct pairs.  Asserted as counts (hcreplay --json's trace_bytes),
not times."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from hctune import native, paths
from hctune.trace import Writer, spec

BIG = 20 << 20          # past the 16 MiB that fits in an op


def _replay(path, *args):
    r = subprocess.run([str(native.path("hcreplay")), str(path), "--json", "--repeat", "1",
                        "--no-touch", *args], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_eight_bytes_per_event_on_a_known_trace(tmp_path):
    path = tmp_path / "known.hct"
    n = 0
    with Writer(path, command="known") as w:
        for round_ in range(100):
            base = 0x10000000 + round_ * 0x100000
            for i in range(40):
                w.malloc(base + 0x1000 * i, 16 + 8 * i)            # 40 sizes
            for i in range(0, 40, 2):
                w.realloc(base + 0x1000 * i, base + 0x80000 + 0x1000 * i, 4000 + i)
            w.memalign(base + 0xF0000, 100, align=64)
            w.calloc(base + 0xF8000, BIG + round_ % 2)              # two big sizes
            for i in range(40):
                w.free(base + (0x80000 if i % 2 == 0 else 0) + 0x1000 * i)
            w.free(base + 0xF0000)
            w.free(base + 0xF8000)
            n += 40 + 20 + 2 + 40 + 2
    r = _replay(path)
    assert r["events"] == n and r["ops"] == n
    assert r["skipped"] == 0 and r["repaired"] == 0 and r["failed"] == 0
    # the table holds memalign's one pair and the two big sizes; each entry 9 bytes
    assert r["distinct_sizes"] == 3
    assert r["trace_bytes"] == 8 * n + 9 * 3
    assert r["trace_bytes"] / r["events"] <= 8.01
    assert r["max_live_bytes"] == sum(16 + 8 * i for i in range(40)) + 100 + BIG + 1 - sum(
        16 + 8 * i for i in range(0, 40, 2)) + sum(4000 + i for i in range(0, 40, 2))


def test_a_threaded_trace_adds_one_byte_per_op(tmp_path):
    path = tmp_path / "two.hct"
    with Writer(path, command="two threads") as w:
        for i in range(1000):
            w.malloc(0x20000000 + 0x100 * i, 24, thread=i % 2)
        for i in range(1000):
            w.free(0x20000000 + 0x100 * i, thread=(i + 1) % 2)      # the other thread frees
    r = _replay(path)
    assert r["replay_threads"] == 2 and r["handoffs"] > 0
    assert r["skipped"] == 0 and r["failed"] == 0
    assert r["trace_bytes"] == 9 * 2000
    off = _replay(path, "--threads", "off")
    assert off["trace_bytes"] == 8 * 2000


def test_a_streamed_replay_holds_one_chunk_and_replays_the_same_calls(tmp_path):
    """--stream on (auto above 2 GiB of ops): no op array, the trace read again a chunk at a
    time; the allocator sees exactly the calls of a whole load (HC's own counters agree), and
    the replay holds one chunk of ops whatever the trace's length."""
    path = tmp_path / "long.hct"
    n = 0
    with Writer(path, command="long") as w:
        for round_ in range(300):                 # 300 x 610 events: several 64 Ki-op chunks
            base = 0x10000000 + (round_ % 7) * 0x100000
            for i in range(300):
                w.malloc(base + 0x100 * i, 16 + (i * round_) % 3000)
            for i in range(0, 300, 3):
                w.realloc(base + 0x100 * i, base + 0x80000 + 0x100 * i, 5000 + i)
            w.memalign(base + 0xF0000, 100 + round_, align=64)
            w.calloc(base + 0xF8000, BIG + round_ % 2)
            for i in range(300):
                w.free(base + (0x80000 if i % 3 == 0 else 0) + 0x100 * i)
            w.free(base + 0xF8000)
            w.free(base + 0xF0000)
            n += 300 + 100 + 2 + 300 + 2
    lib = paths.BUILD / "libhcmalloc.so"
    if not lib.exists():
        pytest.fail(f"{lib} is missing: run make")
    hc = {"LD_PRELOAD": str(lib)}
    runs = {}
    # "on" twice: the second takes the first pass's results from the cache
    for i, mode in enumerate(("off", "on", "on")):
        r = subprocess.run([str(native.path("hcreplay")), str(path), "--json", "--repeat", "2",
                            "--stream", mode], capture_output=True, text=True, timeout=120,
                           env={**os.environ, **hc, "XDG_CACHE_HOME": str(tmp_path / "c")})
        assert r.returncode == 0, r.stderr
        runs[mode, i] = json.loads(r.stdout)
    assert len(list((tmp_path / "c" / "hctune" / "replay").glob("*.pass1"))) == 1
    whole, streamed, cached = runs["off", 0], runs["on", 1], runs["on", 2]
    for k in ("ops", "events", "slots", "max_live_bytes", "distinct_sizes", "hc_stats"):
        assert cached[k] == streamed[k], k
    assert (whole["streamed"], streamed["streamed"]) == (False, True)
    for k in ("ops", "events", "slots", "max_live_bytes", "max_live_objects", "distinct_sizes",
              "skipped", "repaired", "failed", "hc_stats"):
        assert streamed[k] == whole[k], k
    assert whole["ops"] == n and whole["trace_bytes"] > 8 * n
    assert streamed["trace_bytes"] == 8 * 64 * 1024 + 9 * streamed["distinct_sizes"]
    assert streamed["rss_samples"] > 0 and streamed["mean_rss_bytes"] is not None
