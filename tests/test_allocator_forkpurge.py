"""HC under other people's tests (issue 22), with glibc as the known-good reference: fork in
glibc's lock order, fork from a signal handler, memory of exited threads given back whatever
ARENAS is, and glibc's errno and cancellation rules (tests/c/hc_forkpurge.c).

A hang is a failure by timeout: each run gets a generous limit (a run takes well under a second
on a quiet machine), never a wait that passes when the program is merely slow.
"""

from __future__ import annotations

import random
import subprocess

import pytest

from conftest import preload_env
from hctune import knobs

RUNS = 20
HANG_S = 90  # per run, a guard: a deadlocked run never finishes (one takes under 0.2 s)


@pytest.fixture(scope="module")
def program(c_program):
    # -fno-builtin: gcc knows posix_memalign and would assume it leaves errno alone.
    return c_program("hc_forkpurge", ("-fno-builtin",))


@pytest.fixture(params=["glibc", "hc", "hc-small"])
def library(request):
    """glibc, HC generic, and HC with the small pages on (their lock joins the fork order)."""
    if request.param == "glibc":
        return None
    if request.param == "hc":
        return request.getfixturevalue("hcmalloc_so")
    return request.getfixturevalue("hc_library")(knobs.resolve("generic", ["SMALL_MAX=256"]))


def run(program, args, library, timeout=HANG_S, **env):
    try:
        return subprocess.run([str(program), *map(str, args)], capture_output=True, text=True,
                              timeout=timeout, env=preload_env(library, **env))
    except subprocess.TimeoutExpired:
        pytest.fail(f"hc_forkpurge {' '.join(map(str, args))} hung (no exit in {timeout} s)")


@pytest.fixture(scope="module")
def long_lines(tmp_path_factory):
    """32 lines of 50..200 KB: getline reallocs its buffer many times under the FILE lock."""
    path = tmp_path_factory.mktemp("lines") / "lines.txt"
    rng = random.Random(22)
    path.write_text("".join("x" * rng.randint(50_000, 200_000) + "\n" for _ in range(32)))
    return path


def test_fork_while_threads_hold_stdio_locks(program, library, long_lines):
    """Threads in getline (a FILE lock held across realloc), threads allocating inside
    flockfile, one in fflush(NULL) (the list lock, then every FILE's), three forking: 20 runs,
    none hangs (HC's prepare handler used to take the arena locks before fork took the list
    lock: 6 of 6 runs hung by hand)."""
    for i in range(RUNS):
        res = run(program, ["stdio-fork", long_lines], library)
        assert res.returncode == 0 and res.stdout == "ok stdio-fork forks=45\n", \
            f"run {i}: {res.stdout}{res.stderr[-2000:]}"


def test_fork_from_a_signal_handler_during_fork(program, library):
    """Single-threaded: a fork loop while another process signals it and the handler forks
    too, often inside the outer fork's atfork handlers: 20 runs, none hangs (HC's prepare used
    to lock the arenas even single-threaded, and the nested fork waited on the outer's lock)."""
    nested = 0
    for i in range(RUNS):
        res = run(program, ["signal-fork"], library)
        assert res.returncode == 0 and res.stdout.startswith("ok signal-fork "), \
            f"run {i}: {res.stdout}{res.stderr[-2000:]}"
        nested += int(res.stdout.split("nested=")[1])
    assert nested > 0, "no signal ever arrived: the test exercised nothing"


@pytest.mark.parametrize("knob,after", [("ARENAS=1", "light"), ("ARENAS=4", "light"),
                                        ("ARENAS=64", "light"), ("ARENAS=1", "idle"),
                                        ("ARENAS=64", "idle"), ("SMALL_MAX=256", "idle"),
                                        ("ARENAS=1,TCACHE_COUNT=0", "idle"),
                                        ("ARENAS=1,SMALL_MAX=1024", "idle")])
def test_thread_churn_gives_memory_back(program, hc_library, knob, after):
    """5 cycles of 4 threads allocating and freeing 256 MiB each (1 GiB a cycle, mixed sizes)
    and exiting, then light use (one 8 KiB and eight small malloc/free every 10 ms) or none at
    all: RSS below 64 MiB within 3 s, whatever ARENAS the search picks (with ARENAS=64 each
    generation of threads used to fill fresh arenas that nothing ever purged: 250 MiB more per
    cycle; an idle program kept everything).  Idle, it is the purge thread (PURGE_THREAD) that
    gives memory back, the small pages' empty pool included -- also when no thread ever uses the
    thread cache (TCACHE_COUNT=0, or small pages taking every size it holds) with one arena."""
    lib = hc_library(knobs.resolve("generic", knob.split(",")))
    res = run(program, ["churn", 5, 256, after], lib, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr[-2000:]
    assert "released_ms" in res.stdout, f"RSS never fell below 64 MiB:\n{res.stdout}"


@pytest.mark.parametrize("name", ["glibc", "hc", "hc-debug"])
def test_errno_rules(program, name, request):
    """free keeps errno when munmap fails (the map count exhausted); posix_memalign failing
    leaves errno ENOMEM, memalign(2^63, n) sets ENOMEM, above 2^63 EINVAL -- as glibc does."""
    lib = None if name == "glibc" else request.getfixturevalue(
        "hcmalloc_so" if name == "hc" else "hcmalloc_debug_so")
    res = run(program, ["errno"], lib, timeout=120)
    assert res.returncode == 0 and "ok " in res.stdout, res.stdout + res.stderr[-2000:]
    if "skipped" in res.stdout:
        pytest.skip(res.stdout.splitlines()[0])
    assert "free_errno munmap_failed=1 errno=1234" in res.stdout, res.stdout


def test_malloc_stats_prints_with_a_pending_cancel(program, library):
    """A thread with a pending cancel calls malloc_stats: it prints (write(2) is a cancellation
    point; cancellation is off around it, as in glibc), then the thread is cancelled."""
    res = run(program, ["stats-cancel"], library)
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout == "ok stats-cancel cancelled=1\n", res.stdout
    assert "system bytes" in res.stderr and "max mmap bytes" in res.stderr, res.stderr
