"""The debug build's two levels (issue 11, fault 5; docs/allocator.md, "The debug build").

The default debug build (HC_DEBUG=1, build/libhcmalloc-debug.so) checks what each call touches
and walks the whole heap only every N calls, so it runs real programs: the 8-thread ring test
(tests/c/hc_threads.c) within 10x of the release build (a ratio of wall times, so measured by
bench/debug_overhead.py, not here). It still catches a double free, an overflow into the next
block's header and a free of a pointer malloc never returned, and does so with the periodic
walks turned off (HCMALLOC_CHECK=0): the per-call checks find them. The full check after every
call (HCMALLOC_CHECK=1, or -DHC_DEBUG=2) is kept and catches them too."""

import re
import signal
import subprocess

import pytest

from conftest import preload_env

MISUSE = [("double-free", r"double free"), ("double-free-medium", r"double free"),
          ("invalid-free", r"did not return|not allocated"),
          ("overflow", r"heap check failed")]


@pytest.mark.parametrize("check", ["0", "1"], ids=["per-call-only", "full-every-call"])
@pytest.mark.parametrize("mode,message", MISUSE, ids=[m for m, _ in MISUSE])
def test_both_levels_catch_misuse(c_program, hcmalloc_debug_so, mode, message, check):
    res = subprocess.run([str(c_program("hc_api")), mode], capture_output=True, text=True,
                         timeout=60, env=preload_env(hcmalloc_debug_so, HCMALLOC_CHECK=check))
    assert res.returncode == -signal.SIGABRT, f"{mode}: exit {res.returncode}\n{res.stdout}{res.stderr}"
    assert re.search(message, res.stderr), res.stderr
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr


def test_periodic_walk_finds_what_no_call_touches(c_program, hcmalloc_debug_so):
    """An overflow into the header of a block nobody frees again: no call's own checks see it,
    the walk every N calls does (with the walks off the checker never sees it: that is what
    the walks are for)."""
    program = c_program("hc_debug_walk")
    found = subprocess.run([str(program), "3000"], capture_output=True, text=True, timeout=60,
                           env=preload_env(hcmalloc_debug_so, HCMALLOC_CHECK="1000"))
    assert found.returncode == -signal.SIGABRT, found.stdout + found.stderr
    assert "heap check failed" in found.stderr
    by_default = subprocess.run([str(program), "20000"], capture_output=True, text=True,
                                timeout=60, env=preload_env(hcmalloc_debug_so))
    assert by_default.returncode == -signal.SIGABRT, by_default.stdout + by_default.stderr
    unseen = subprocess.run([str(program), "3000"], capture_output=True, text=True, timeout=60,
                            env=preload_env(hcmalloc_debug_so, HCMALLOC_CHECK="0"))
    # (the corrupt header may still crash the allocator later, in printf's malloc: unchecked)
    assert "heap check failed" not in unseen.stderr, unseen.stderr
