"""HC under threads and fork (tests/c/hc_threads.c), with glibc as the known-good reference.

DESIGN §1: thread-safe, fork-safe (pthread_atfork), usable by LD_PRELOAD in multi-threaded
programs. The ring mode frees nearly every block on a thread other than the one that allocated
it; the fork mode forks while other threads are inside malloc and free.
"""

import re
import subprocess

import pytest

from conftest import preload_env
from hctune import knobs

CASES = {
    # allocator: (ring items per thread, forks)
    "glibc": (100_000, 30),
    "hc": (100_000, 30),
    "hc-debug": (5_000, 10),  # every call walks the heap: fewer items, same code paths
    # A Table 7 row with in-free complete coalescing (§3.11) and no MONITOR.
    "hc-gawk-mem": (50_000, 10),
}


@pytest.fixture(params=list(CASES))
def allocator(request):
    if request.param == "glibc":
        return request.param, None
    if request.param == "hc-gawk-mem":
        return request.param, request.getfixturevalue("hc_library")(knobs.preset("gawk-mem"))
    fixture = "hcmalloc_so" if request.param == "hc" else "hcmalloc_debug_so"
    return request.param, request.getfixturevalue(fixture)


def run(program, args, library, timeout=120):
    return subprocess.run([str(program), *args], capture_output=True, text=True,
                          timeout=timeout, env=preload_env(library))


def test_ring_of_eight_threads(c_program, allocator):
    name, library = allocator
    items = CASES[name][0]
    res = run(c_program("hc_threads"), ["ring", str(items)], library)
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout == f"ok ring threads=8 blocks={items * 8}\n"


def test_fork_while_threads_allocate(c_program, allocator):
    name, library = allocator
    forks = CASES[name][1]
    res = run(c_program("hc_threads"), ["fork", str(forks)], library)
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout == f"ok fork children={forks}\n"
