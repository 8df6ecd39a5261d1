"""Programs that crash, or end while threads still run, keep their trace (issue 11, fault 1).

tests/c/trace_crash.c makes its allocations and then dies of a fatal signal (a NULL
dereference, abort(), a stack overflow, its own SIGSEGV handler that re-raises) or exits while
four threads hold unwritten events. The tracer must write every event made before the end and
leave the exit status as it was."""

import json
import signal
import subprocess

import pytest

from conftest import hctune as run_hctune
from hctune import paths
from hctune.trace import open_trace

TRACER = paths.BUILD / "libhctrace.so"
N = 1000


@pytest.fixture(scope="module")
def crash(c_program):
    if not TRACER.exists():
        pytest.fail(f"{TRACER} is missing: run make")
    return c_program("trace_crash")


def hctune(tmp_path, *args):
    return run_hctune(tmp_path / "h.db", *args, check=False, timeout=120, cwd=tmp_path)


def test_profile_of_a_crashing_program_keeps_its_events(crash, tmp_path):
    r = hctune(tmp_path, "profile", "-o", "crash.hct", crash, "segv", N)
    assert r.returncode == 128 + signal.SIGSEGV, r.stderr       # the status passes through
    assert "died of signal 11 (SIGSEGV); the trace covers its events up to that point" in r.stderr
    s = hctune(tmp_path, "stats", "--json", "crash.hct")
    assert s.returncode == 0, s.stderr
    stats = json.loads(s.stdout)
    # N kept blocks, plus stdout's buffer: every allocation up to the crash
    assert stats["events"] >= N and stats["max_live_objects"] >= N, stats


# mode, how the process ends, events the trace must hold at least
ENDINGS = [
    ("abort", -signal.SIGABRT, N),
    ("overflow", -signal.SIGSEGV, N),          # on a full stack: our handler's own stack
    ("handler", -signal.SIGSEGV, N),           # the program's handler ran, then ours
    ("threads", 0, 4 * N),                     # exit() while four threads still run
    ("threads-segv", -signal.SIGSEGV, 4 * N),  # a crash while four threads still run
]


@pytest.mark.parametrize("mode,status,events", ENDINGS, ids=[e[0] for e in ENDINGS])
def test_every_ending_writes_the_trace(crash, tmp_path, mode, status, events):
    out = tmp_path / "t.hct"
    r = subprocess.run([str(crash), mode, str(N)], capture_output=True, text=True, timeout=60,
                       env={"LD_PRELOAD": str(TRACER), "HCTRACE_OUT": str(out)})
    assert r.returncode == status, r.stderr
    assert r.stdout == "ready\n"
    if mode == "handler":
        assert r.stderr == "handler ran\n"
    assert open_trace(out).count >= events
