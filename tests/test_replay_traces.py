"""Real traces for the replay tests (gawk, sqlite3, python3 recorded by build/libhctrace.so), and
what the harness makes of them: its loader agrees with the trace statistics, every allocator
replays them, the numbers hang together.  The fixtures are in conftest.py (the programs in
workloads.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from hctune import paths, replay

def trace_stats(trace: Path) -> dict:
    res = subprocess.run([str(paths.BUILD / "hctrace-tool"), "stats", str(trace)],
                         capture_output=True, text=True, check=True)
    return json.loads(res.stdout)


def test_loader_agrees_with_trace_statistics(replay_traces):
    """The harness's own bookkeeping (dense ids, live bytes) matches the trace reader's."""
    for name, trace in replay_traces.items():
        r = replay.measure(trace, "glibc", repeat=1)
        st = trace_stats(trace)
        assert r["events"] == st["events"], name
        assert r["max_live_bytes"] == st["max_live_bytes"], name
        assert r["max_live_objects"] == st["max_live_objects"], name
        assert r["skipped"] == 0 and r["repaired"] == 0, name
        assert r["failed"] == 0, name
        # every event becomes one op (nothing failed, nothing unknown)
        assert r["ops"] == st["events"], name
        assert r["slots"] == st["max_live_objects"], name


@pytest.mark.parametrize("allocator", ["glibc", "kingsley", "jemalloc", "mimalloc", "tcmalloc",
                                       "hc"])
def test_every_allocator_replays(replay_traces, allocator):
    trace = replay_traces.get("sqlite3") or next(iter(replay_traces.values()))
    r = replay.measure(trace, allocator, repeat=3)
    assert r["ops"] > 10000 and r["failed"] == 0
    assert len(r["times_ns"]) == 3 and all(t > 0 for t in r["times_ns"])
    assert r["time_ns_per_op"] == pytest.approx(sorted(r["times_ns"])[1] / r["ops"])
    # the allocator must hold at least what is live; and not absurdly more
    assert r["peak_rss_bytes"] >= 0.8 * r["max_live_bytes"]
    assert r["footprint_bytes"] >= r["max_live_bytes"]
    assert r["fragmentation"] == pytest.approx(r["footprint_bytes"] / r["max_live_bytes"] - 1)
    if allocator == "hc":
        assert r["footprint_source"] == "hc_stats" and r["hc_stats"]["version"] >= 1
    else:
        assert r["footprint_source"] == "rss" and r["hc_footprint_bytes"] is None
    assert r["library"] is None if allocator == "glibc" else Path(r["library"]).exists()


def test_kingsley_rounds_to_powers_of_two(replay_traces):
    """CK's known cost (Hasan & Chang 2006, Table 8): more memory than glibc for the same trace."""
    trace = replay_traces.get("python3") or next(iter(replay_traces.values()))
    ck = replay.measure(trace, "kingsley", repeat=1)
    gl = replay.measure(trace, "glibc", repeat=1)
    assert ck["peak_rss_bytes"] > 1.1 * gl["peak_rss_bytes"]


def test_bump_rewinds_between_repeats(replay_traces):
    """The overhead allocator only stays cheap if the harness really frees everything between
    repeats (§4.4): then it rewinds once per repeat."""
    trace = next(iter(replay_traces.values()))
    env = dict(os.environ, LD_PRELOAD=str(paths.BUILD / "libhcbump.so"), HCBUMP_STATS="1")
    res = subprocess.run([str(paths.BUILD / "hcreplay"), str(trace), "--repeat", "4", "--json"],
                         env=env, capture_output=True, text=True, check=True)
    rewinds = int(res.stderr.split("rewinds=")[1].split()[0])
    assert rewinds >= 4 and "live=0" in res.stderr


def test_instruction_count_repeats_bit_exact(replay_traces):
    if not shutil.which("valgrind"):
        pytest.skip("valgrind not installed (.ci/run installs it)")
    trace = replay_traces.get("gawk") or next(iter(replay_traces.values()))
    a = replay.measure(trace, "hc", repeat=1, metric="instructions")
    b = replay.measure(trace, "hc", repeat=1, metric="instructions")
    assert a["instructions"] == b["instructions"] > a["ops"] * 20
    assert a["instructions_per_op"] == a["instructions"] / a["ops"]
    assert replay.measure(trace, "glibc", repeat=1)["instructions_per_op"] is None


def test_kingsley_api(build_dir):
    """Data integrity, alignment, calloc zeroing, threads and fork on the Kingsley baseline."""
    prog = build_dir / "tests" / "replay_malloc_api"
    if not prog.exists():
        subprocess.run(["make", "-s", str(prog.relative_to(paths.ROOT))], cwd=paths.ROOT,
                       check=True)
    for lib in (None, build_dir / "libkingsley.so"):
        env = dict(os.environ)
        env.pop("LD_PRELOAD", None)
        if lib:
            env["LD_PRELOAD"] = str(lib)
        res = subprocess.run([str(prog)], env=env, capture_output=True, text=True, timeout=120)
        assert res.returncode == 0 and res.stdout.strip() == "ok", res.stdout + res.stderr


def test_kingsley_passes_the_api_edge_cases(c_program, build_dir):
    """The same edge-case program HC is held to (tests/c/hc_api.c)."""
    env = dict(os.environ, LD_PRELOAD=str(build_dir / "libkingsley.so"))
    res = subprocess.run([str(c_program("hc_api"))], env=env, capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0 and res.stdout.startswith("ok"), res.stdout + res.stderr


def test_multithreaded_trace_replays_in_recorded_order(build_dir, tmp_path):
    """tests/c/replay_malloc_api (3 allocating threads and a fork), traced, then replayed on one
    thread: every call accounted for, nothing skipped, the same numbers on every allocator."""
    prog = build_dir / "tests" / "replay_malloc_api"
    if not prog.exists():
        subprocess.run(["make", "-s", str(prog.relative_to(paths.ROOT))], cwd=paths.ROOT,
                       check=True)
    trace = tmp_path / "mt.hct"
    env = dict(os.environ, LD_PRELOAD=str(build_dir / "libhctrace.so"), HCTRACE_OUT=str(trace))
    subprocess.run([str(prog)], env=env, check=True, capture_output=True, timeout=120)
    st = trace_stats(trace)
    results = [replay.measure(trace, a, repeat=1, threads="off")
               for a in ("glibc", "hc", "kingsley")]
    for r in results:
        assert r["threads"] == st["threads"] >= 3
        assert r["ops"] == st["events"] and r["skipped"] == r["repaired"] == r["failed"] == 0
        assert r["max_live_bytes"] == st["max_live_bytes"]
    assert "replayed in recorded order on one thread" in replay.summary(results[0])
