"""The malloc API's edge cases and misuse (tests/c/hc_api.c) against glibc and HC.

glibc runs the same binary as the known-good reference; HC must give NULL with the right errno
where the C standard and POSIX ask for it, and never crash (DESIGN §1: complete API).
"""

import re
import signal
import subprocess

import pytest

from conftest import preload_env


@pytest.fixture(params=["glibc", "hc", "hc-debug"])
def allocator(request):
    """The library to LD_PRELOAD (None: glibc itself)."""
    if request.param == "glibc":
        return None
    return request.getfixturevalue("hcmalloc_so" if request.param == "hc" else "hcmalloc_debug_so")


def run(program, args, library):
    return subprocess.run([str(program), *args], capture_output=True, text=True, timeout=60,
                          env=preload_env(library))


def test_api_edges(c_program, allocator):
    res = run(c_program("hc_api"), [], allocator)
    assert res.returncode == 0, res.stdout + res.stderr
    assert re.fullmatch(r"ok \d+ checks\n", res.stdout), res.stdout


# Each misuse must end the process with SIGABRT and a message naming the mistake. glibc (whose
# tcache detects both) shows the test can see a detection; the debug HC build must do as well.
MISUSE = [("double-free", r"double free"), ("double-free-medium", r"double free"),
          ("invalid-free", r"invalid|not (a |an )?(allocated|heap|block)|(did )?not return")]


@pytest.mark.parametrize("mode,message", MISUSE, ids=[m for m, _ in MISUSE])
@pytest.mark.parametrize("which", ["glibc", "hc-debug"])
def test_misuse_aborts_with_message(c_program, request, which, mode, message):
    library = None if which == "glibc" else request.getfixturevalue("hcmalloc_debug_so")
    res = run(c_program("hc_api"), [mode], library)
    assert res.returncode == -signal.SIGABRT, (
        f"{mode}: expected an abort, got exit {res.returncode}\n{res.stdout}{res.stderr}")
    assert re.search(message, res.stderr, re.IGNORECASE), f"{mode}: unclear message: {res.stderr!r}"
    assert len(res.stderr.strip().splitlines()) <= 3, f"{mode}: not a short message: {res.stderr!r}"


def test_debug_build_catches_overflow(c_program, hcmalloc_debug_so):
    """The debug build's heap walk is real: a write past a block's end is caught (glibc is not
    held to this: it notices only some such writes)."""
    res = run(c_program("hc_api"), ["overflow"], hcmalloc_debug_so)
    assert res.returncode == -signal.SIGABRT, f"exit {res.returncode}: {res.stdout}{res.stderr}"
    assert re.search(r"hcmalloc", res.stderr), res.stderr
