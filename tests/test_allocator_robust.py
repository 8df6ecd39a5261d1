"""HC under other people's tests, round two (issue 35), glibc the reference where it has one.

1. The purge thread (PURGE_THREAD) never decides when a process ends or which signals it gets
   (tests/c/hc_lifetime.c): main ending with pthread_exit(NULL) after threads exits 0; a child
   forked from a non-main thread exits when its only thread does; no thread of the process
   blocks a signal main does not, and SIGTERM ends it.  Each run in its own process group, with
   a bounded timeout, and the group must be empty afterwards.
2. A corrupted heap ends in an abort with a message, never a hang or a bare SIGSEGV
   (tests/c/hc_misuse.c): an 8-byte overflow past a block with a header, then frees, on every
   preset; a write after free of a listed or kept block; free(p + 16) of a 20,000-byte block.
   Blocks of the small pages carry no header: what an overflow there does is not seen by the
   release build (as in mimalloc without its secure mode); the debug build names it.
3. The debug build names an 8-byte underflow, an interior free and a write after free on every
   kind of block (small page, paper heap, kept big block).

A hang is a failure by timeout: each run gets a generous limit (one takes well under a second),
never a wait that passes when the program is merely slow.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import build_hc_libraries, preload_env
from hctune import knobs

HANG_S = 30  # per run, a guard: a run takes under 0.2 s; a hung one never ends


@pytest.fixture(scope="module")
def lifetime(c_program):
    return c_program("hc_lifetime")


@pytest.fixture(params=["glibc", "generic", "debug", "arenas64"])
def library(request):
    """glibc, and HC with the purge thread on (the default) in three builds: generic, the debug
    build, and ARENAS=64."""
    if request.param == "glibc":
        return None
    if request.param == "generic":
        return request.getfixturevalue("hcmalloc_so")
    if request.param == "debug":
        return request.getfixturevalue("hcmalloc_debug_so")
    return request.getfixturevalue("hc_library")(knobs.resolve("generic", ["ARENAS=64"]))


def group_gone(pgid: int) -> bool:
    """Is process group pgid empty?  Polled for up to 5 s: a child the program waited for is
    already reaped; one reparented to init is reaped by it a moment later."""
    for _ in range(100):
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    os.killpg(pgid, signal.SIGKILL)  # leave nothing behind, then fail
    return False


def run_alone(argv, library, **env):
    """argv in a new process group (its own session); (returncode, stdout, stderr), after
    asserting it ended within HANG_S and left no process of its group behind."""
    proc = subprocess.Popen([str(a) for a in argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True,
                            env=preload_env(library, **env))
    try:
        out, err = proc.communicate(timeout=HANG_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"{' '.join(map(str, argv))} did not end in {HANG_S} s")
    assert group_gone(proc.pid), f"{argv}: a process of its group outlived it"
    return proc.returncode, out, err


def test_main_ending_with_pthread_exit_ends_the_process(lifetime, library):
    """Threads allocate and exit, then main calls pthread_exit(NULL): the process exits 0
    (HC's purge thread used to keep it alive for ever, a zombie leader)."""
    rc, out, err = run_alone([lifetime, "main-exit"], library)
    assert rc == 0, out + err


@pytest.mark.parametrize("spawn", ["", "spawn"], ids=["only-thread", "after-a-thread"])
def test_child_forked_from_a_thread_ends_with_it(lifetime, library, spawn):
    """A non-main thread forks; in the child that thread, the only one (or after it ran one
    more thread, which exited), returns: the child exits 0 and the parent's waitpid returns."""
    rc, out, err = run_alone([lifetime, "fork-thread", *([spawn] if spawn else [])], library)
    assert rc == 0 and out == "child status 0\n", out + err


def test_no_thread_blocks_what_main_does_not_and_sigterm_ends_it(lifetime, library):
    """After threads came and went (the purge thread running), every thread of the process has
    main's signal mask, and SIGTERM ends the process (the purge thread used to block every
    signal: with main gone, SIGTERM stayed pending for ever)."""
    proc = subprocess.Popen([str(lifetime), "masks"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True,
                            env=preload_env(library))
    try:
        lines = []
        for line in proc.stdout:  # the program prints "ready", then sleeps until signalled
            lines.append(line)
            if line == "ready\n":
                break
        os.kill(proc.pid, signal.SIGTERM)
        _, err = proc.communicate(timeout=HANG_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"SIGTERM did not end it in {HANG_S} s")
    assert group_gone(proc.pid)
    assert lines and lines[-1] == "ready\n", "".join(lines) + err
    assert lines[0].endswith(" masks 1\n"), lines[0]
    assert proc.returncode == -signal.SIGTERM, (proc.returncode, err)


FORK_FROM_A_THREAD = """
import os, sys, threading
def churn():
    keep = [bytearray(16 + i % 3000) for i in range(20000)]
def func():
    pid = os.fork()
    if pid == 0:  # the child: this thread is its only one, and returns
        print(threading.main_thread().ident == threading.get_ident())
        sys.stdout.flush()
    else:
        print("child", os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
workers = [threading.Thread(target=churn) for _ in range(3)]
for t in workers: t.start()
for t in workers: t.join()
th = threading.Thread(target=func)
th.start()
th.join()
"""


@pytest.mark.parametrize("build", ["generic", "debug"])
def test_python_fork_from_a_thread(request, build):
    """CPython's test_threading.test_main_thread_after_fork_from_nonmain_thread, in short, on
    HC (PYTHONMALLOC=malloc: every object through malloc): exits 0 (it used to hang)."""
    lib = request.getfixturevalue("hcmalloc_so" if build == "generic" else "hcmalloc_debug_so")
    rc, out, err = run_alone([sys.executable, "-c", FORK_FROM_A_THREAD], lib,
                             PYTHONMALLOC="malloc")
    assert rc == 0 and out.split("\n")[-2] == "child 0", out + err


# ---- 2, 3: a corrupted heap ----

@pytest.fixture(scope="module")
def misuse(c_program):
    return c_program("hc_misuse")


@pytest.fixture(scope="module")
def every_preset():
    """{preset: its release build}, every preset of configs/presets.toml."""
    names = knobs.preset_names()
    return dict(zip(names, build_hc_libraries([knobs.preset(n) for n in names])))


def aborts_with_message(misuse, library, *args):
    rc, out, err = run_alone([misuse, *args], library)
    assert rc == -signal.SIGABRT and err.startswith("hcmalloc: ") and err.endswith("\n"), \
        f"hc_misuse {' '.join(map(str, args))}: exit {rc}\n{out}{err[-2000:]}"
    return err


def test_overflow_then_free_aborts_on_every_preset(misuse, every_preset):
    """8 bytes past a block with a header (the next block's header), then frees: an abort with
    a message on every preset, at every size a preset gives a header (paper-generic used to
    loop for ever in the big list's removal on a zeroed header, and crash on others)."""
    for name, lib in every_preset.items():
        small_max = knobs.complete(knobs.preset(name)).get("SMALL_MAX", 0)
        sizes = [n for n in (32, 200, 3000, 20000) if n > small_max] or [20000]
        for n in sizes:
            for fill in ("0x41", "0"):
                aborts_with_message(misuse, lib, "overflow", n, fill)


@pytest.mark.parametrize("preset", ["generic", "paper-generic"])
def test_write_after_free_of_a_listed_block_aborts(misuse, every_preset, preset):
    """16 bytes written into a freed block that is on a list (its links), then that size is
    allocated again: an abort naming the list, not a wild pointer returned or followed."""
    sizes = (20000,) if preset == "generic" else (32, 200, 3000, 20000)
    for n in sizes:
        err = aborts_with_message(misuse, every_preset[preset], "uaf", n, "0x41")
        assert "corrupted" in err, err


def test_interior_free_of_a_big_block_is_an_invalid_pointer(misuse, hcmalloc_so):
    """free(p + 16) of a 20,000-byte block: "invalid pointer", an abort (it was a SIGSEGV)."""
    err = aborts_with_message(misuse, hcmalloc_so, "interior", 20000)
    assert "invalid pointer" in err, err


@pytest.mark.parametrize("mode", ["underflow", "interior", "uaf"])
def test_debug_build_names_misuse_on_every_kind_of_block(misuse, hcmalloc_debug_so, mode):
    """The debug build: an 8-byte underflow, free(p + 16) and a write after free, on a small-page
    block (32, 3,000 bytes) and a heap block (20,000: kept big block when freed), each an abort
    with a message (the underflow before a small block and the write after free to a 20,000-byte
    block were bare SIGSEGVs)."""
    for n in (32, 3000, 20000):
        aborts_with_message(misuse, hcmalloc_debug_so, mode, n, "0x41")
