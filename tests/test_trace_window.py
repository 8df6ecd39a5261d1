"""Windowed tracing (issue 23): `hctune profile --start-after S --duration S` records a window
of the run.  tests/c/trace_window.c allocates blocks before the window, frees some of them inside
it (also from other threads), and allocates more after it.  The window's trace must begin with
the blocks live when it opened, so that it replays with no anomaly and the right live bytes."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from hctune import native, paths
from hctune.trace import open_trace, spec

TRACER = paths.BUILD / "libhctrace.so"
# The window opens halfway through the first 2 s pause and shuts halfway through the second:
# phase 1, and phases 1 and 2 together, have 1 s to run on a loaded machine (they take
# milliseconds), and phase 3 starts 1 s after the window shut.
PAUSE_MS = 2000
START, DURATION = 1.0, 2.0


@pytest.fixture(scope="module")
def window_program(c_program):
    if not TRACER.exists():
        pytest.fail(f"{TRACER} is missing: run make")
    return c_program("trace_window")


def _profile(tmp_path, program, threads):
    out = tmp_path / f"w{threads}.hct"
    r = subprocess.run([sys.executable, "-m", "hctune", "--db", str(tmp_path / "h.db"),
                        "profile", "--start-after", str(START), "--duration", str(DURATION),
                        "-o", str(out), str(program), str(PAUSE_MS), str(threads)],
                       cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return out


def _live_at_end(trace):
    live = {}
    for e in trace:
        if e.op == spec.FREE:
            assert e.ptr in live, f"free of a block the window does not know: {e}"
            del live[e.ptr]
        elif e.op == spec.REALLOC:
            assert e.old_ptr in live, f"realloc of a block the window does not know: {e}"
            del live[e.old_ptr]
            live[e.ptr] = e.size
        else:
            live[e.ptr] = e.size
    return live


@pytest.mark.parametrize("threads", [0, 2])
def test_a_window_replays_with_no_anomaly_and_the_right_live_bytes(tmp_path, window_program,
                                                                   threads):
    out = _profile(tmp_path, window_program, threads)
    t = open_trace(out)
    events = list(t)
    sizes = [e.size for e in events if e.op != spec.FREE]
    # the blocks of phase 1 still live when the window opened, and only those, come first
    assert sorted(s for s in sizes if 1000 <= s < 1100) == list(range(1050, 1100))
    assert not [s for s in sizes if 9000 <= s < 9100], "phase 3 is after the window"
    assert sorted(s for s in sizes if 5000 <= s < 5100) == list(range(5000, 5050))
    assert sorted(s for s in sizes if 20000 <= s < 20100) == sorted(
        list(range(20000, 20020)) * threads)
    live = _live_at_end(events)
    ours = {p: s for p, s in live.items() if s >= 1000}     # (glibc's own blocks: thread TLS)
    gone = {95 - k for k in range(threads)}
    expect = (sum(1000 + i for i in range(75, 100) if i not in gone)
              + sum(5000 + i for i in range(10, 50)) + threads * sum(range(20000, 20020)))
    assert sum(ours.values()) == expect

    st = json.loads(subprocess.run([str(native.path("hctrace-tool")), "stats", str(out), "10"],
                                   capture_output=True, text=True, check=True).stdout)
    assert st["anomalies"] == {"free_unknown": 0, "realloc_unknown": 0, "alloc_live": 0}
    assert st["final_live_bytes"] == sum(live.values())
    r = subprocess.run([str(native.path("hcreplay")), str(out), "--json", "--repeat", "1"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["skipped"] == 0 and rep["repaired"] == 0 and rep["failed"] == 0
    assert rep["max_live_bytes"] == st["max_live_bytes"]


def _signal_at_each_pause(argv, env, pauses):
    """Run a test program that says "pause" and waits for a line: at each of its `pauses`,
    send HCTRACE_SIGNAL's signal (SIGUSR2), then let it go on (the signal is pending before
    the program reads the line: no race); it says "done" and exits 0."""
    import signal
    p = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True)
    for _ in range(pauses):
        assert p.stdout.readline().strip() == "pause"
        p.send_signal(signal.SIGUSR2)
        p.stdin.write("go\n")
        p.stdin.flush()
    assert p.stdout.readline().strip() == "done"
    assert p.wait(timeout=60) == 0


def test_a_signal_opens_and_shuts_the_window(tmp_path, window_program):
    """HCTRACE_SIGNAL: the first signal opens the window, the second shuts it (a service that
    cannot say in advance when its interesting part comes)."""
    import signal
    out = tmp_path / "s.hct"
    env = dict(os.environ, HCTRACE_OUT=str(out), HCTRACE_SIGNAL=str(int(signal.SIGUSR2)),
               LD_PRELOAD=str(TRACER))
    _signal_at_each_pause([str(window_program), "wait", "0"], env, 2)
    events = list(open_trace(out))
    sizes = [e.size for e in events if e.op != spec.FREE]
    assert sorted(s for s in sizes if 1000 <= s < 1100) == list(range(1050, 1100))
    assert sorted(s for s in sizes if 5000 <= s < 5100) == list(range(5000, 5050))
    assert not [s for s in sizes if 9000 <= s < 9100]
    # after the window shut, the frees of blocks the trace has are still written (another
    # signal could open a window again: the trace stays the heap's history), so A[75..99],
    # freed in phase 3, are gone at its end
    live = _live_at_end(events)      # (and stdio's buffers, live since before the window)
    assert sum(s for s in live.values() if 1000 <= s < 1100 or 5000 <= s < 5100) == (
        sum(5000 + i for i in range(10, 50)))


def test_a_window_that_never_opens_says_so(tmp_path, window_program):
    r = subprocess.run([sys.executable, "-m", "hctune", "--db", str(tmp_path / "h.db"),
                        "profile", "--start-after", "30", "-o", str(tmp_path / "n.hct"),
                        str(window_program), "50", "0"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "nothing recorded" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize("window", [["--duration", "-1"], ["--period", "1"],
                                    ["--duration", "2", "--period", "1"],
                                    ["--duration", "1", "--period", "2", "--signal", "USR2"]])
def test_a_bad_window_is_one_line(tmp_path, window_program, window):
    r = subprocess.run([sys.executable, "-m", "hctune", "--db", str(tmp_path / "h.db"),
                        "profile", *window, str(window_program)],
                       cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


@pytest.fixture(scope="module")
def windows_program(c_program):
    return c_program("trace_windows")


def test_several_windows_and_a_child_forked_inside_one(tmp_path, windows_program):
    """Each signal opens a shut window or shuts an open one.  Between windows the trace keeps
    the frees of blocks it has and leaves out blocks that come and go; the next window opens
    with the blocks allocated meanwhile that are still live.  A child forked inside a window
    starts its trace with its parent's live blocks, so its frees of them are known."""
    import signal
    out = tmp_path / "w.hct"
    env = dict(os.environ, HCTRACE_OUT=str(out), HCTRACE_SIGNAL=str(int(signal.SIGUSR2)),
               LD_PRELOAD=str(TRACER))
    _signal_at_each_pause([str(windows_program)], env, 4)
    (child,) = [f for f in tmp_path.glob("w.hct.*")]
    for trace in (out, child):
        st = json.loads(subprocess.run([str(native.path("hctrace-tool")), "stats", str(trace),
                                        "10"], capture_output=True, text=True,
                                       check=True).stdout)
        assert st["anomalies"] == {"free_unknown": 0, "realloc_unknown": 0, "alloc_live": 0}
    ours = {*range(2000, 2020), *range(3000, 3010), *range(4000, 4010), *range(6000, 6003)}
    events = list(open_trace(out))
    sizes = sorted(e.size for e in events if e.op != spec.FREE and e.size in ours)
    assert sizes == ([2000 + i for i in range(20)] + [3000 + i for i in range(10)]
                     + [4000 + i for i in range(5, 10)])
    assert sorted(s for s in _live_at_end(events).values() if s in ours) == (
        [2010 + i for i in range(5)] + [3005 + i for i in range(5)]
        + [4005 + i for i in range(5)])
    kid = list(open_trace(child))
    assert sorted(s for s in _live_at_end(kid).values() if s in ours) == (
        [2015 + i for i in range(5)] + [6000, 6001, 6002])
    r = subprocess.run([str(native.path("hcreplay")), str(out), "--json", "--repeat", "1"],
                       capture_output=True, text=True, timeout=60)
    rep = json.loads(r.stdout)
    assert rep["skipped"] == 0 and rep["repaired"] == 0 and rep["failed"] == 0


def test_time_slices_of_a_real_program_replay_with_no_anomaly(tmp_path):
    """--period: slices of a python3 run (reallocs, frees of blocks from earlier slices, blocks
    that come and go between slices) make a trace with no anomaly that replays skipping and
    repairing nothing (how many events the slices keep depends on the clock: not asserted)."""
    prog = [sys.executable, "-c", "d = {}\nfor i in range(300000):\n    d[i % 5000] = "
            "[str(i)] * (i % 9)\n    if i % 7 == 0: d.pop((i * 3) % 5000, None)\n"]
    out = tmp_path / "p.hct"
    r = subprocess.run([sys.executable, "-m", "hctune", "--db", str(tmp_path / "h.db"),
                        "profile", "--duration", "0.01", "--period", "0.05", "-o", str(out),
                        *prog], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, PYTHONMALLOC="malloc"))
    assert r.returncode == 0, r.stderr
    st = json.loads(subprocess.run([str(native.path("hctrace-tool")), "stats", str(out), "10"],
                                   capture_output=True, text=True, check=True).stdout)
    assert st["anomalies"] == {"free_unknown": 0, "realloc_unknown": 0, "alloc_live": 0}
    assert st["events"] > 1000
    rep = json.loads(subprocess.run([str(native.path("hcreplay")), str(out), "--json",
                                     "--repeat", "1"], capture_output=True, text=True,
                                    check=True, timeout=120).stdout)
    assert rep["skipped"] == 0 and rep["repaired"] == 0 and rep["failed"] == 0
