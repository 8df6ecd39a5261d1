"""Size classes fitted to a program (allocator/hc/hc_fit.c, hctune.trace.fitted; issue 36).

Tables derived from a random histogram (with FIT_ALIGN8: classes of an odd number of 8-byte
words) and from an adversarial one (every size 1..4096 equally live: the derivation's bound is
what stops it), each built release and debug once, then: every request size 0..4160 served
(usable size, alignment, calloc zeroing, realloc across classes, the memalign family, every size
live at once; tests/c/fit_sizes.c), the randomized stress at 1 and 4 threads, fork while threads
allocate, and the double free of a block of a fitted class caught.  The sizes the tables never
saw are most of 0..4160: that they are served is the fallback to the generic classes.  The pure
derivation (deterministic, bounded, generic for no allocations or only huge blocks, the union of
several traces) and the compile-time check of a hand-edited table are tests/test_fitted_derive.py.
The adversarial table's builds also give each class its own page size (SMALL_PAGE_BLOCKS=8: a
page of 4 KiB up to 64 KiB holding at least 8 blocks), so the same matrix runs pages of every
size, and its page count is checked against the layout.
"""

import random
import re

import pytest

from conftest import (build_hc_libraries, generic_with, prefetch_hc_libraries, run_preloaded,
                      stress)
from hctune.trace import fitted

THREADS = 4


def _random_profile() -> fitted.Profile:
    rng = random.Random(36)
    sizes = {}
    for _ in range(300):
        z = min(4096, int(rng.lognormvariate(4.0, 1.2)) + 1)
        r, live = sizes.get(z, (0, 0))
        sizes[z] = (r + rng.randrange(1, 5000), live + rng.randrange(0, 3000))
    return fitted.Profile(sizes=sizes, max_live_bytes=1)


def _adversarial_profile() -> fitted.Profile:
    return fitted.Profile(sizes={z: (100, 100) for z in range(1, 4097)}, max_live_bytes=1)


TABLES = {
    "random-align8": (fitted.derive(_random_profile(), 0, grain=8), {"FIT_ALIGN8": 1}),
    "adversarial": (fitted.derive(_adversarial_profile(), 0), {"SMALL_PAGE_BLOCKS": 8}),
}


def _env(name):
    """tests/c's stress programs accept 8-byte alignment for a size not a multiple of 16 only
    under a FIT_ALIGN8 table."""
    return {"HC_STRESS_ALIGN8": "1"} if TABLES[name][1].get("FIT_ALIGN8") else {}


def _setting(name):
    fit, extra = TABLES[name]
    return generic_with({**fit.knobs(), **extra})


@pytest.fixture(scope="module")
def libraries():
    names = sorted(TABLES)
    dbg = prefetch_hc_libraries([_setting(n) for n in names], debug=True)   # with rel's
    rel = build_hc_libraries([_setting(n) for n in names])
    dbg = [f.result() for f in dbg]
    return {("release", n): lib for n, lib in zip(names, rel)} | \
           {("debug", n): lib for n, lib in zip(names, dbg)}


def test_tables_are_fitted_and_bounded():
    for name, (fit, _) in TABLES.items():
        assert 1 <= len(fit.table) <= fitted.FIT_MAX, (name, fit)
        assert fit.table == sorted(fit.table) and len(set(fit.table)) == len(fit.table)
    # the random table uses the 8-byte grain somewhere; the adversarial one stays at 16
    assert any(c % 16 for c in TABLES["random-align8"][0].table), TABLES["random-align8"][0]
    assert all(c % 16 == 0 for c in TABLES["adversarial"][0].table)
    assert len(TABLES["adversarial"][0].table) == fitted.FIT_MAX


CASES = [(kind, name) for kind in ("release", "debug") for name in sorted(TABLES)]


@pytest.mark.parametrize("kind,name", CASES, ids=[f"{k}-{n}" for k, n in CASES])
def test_every_size_served(c_program, libraries, kind, name):
    res = run_preloaded([c_program("fit_sizes"), 4096], libraries[kind, name])
    assert res.returncode == 0 and res.stdout == "ok fit_sizes max=4096\n", \
        res.stdout + res.stderr[-2000:]


@pytest.mark.parametrize("threads", [1, THREADS])
@pytest.mark.parametrize("kind,name", CASES, ids=[f"{k}-{n}" for k, n in CASES])
def test_stress(c_program, libraries, kind, name, threads):
    ops, slots = (200_000, 2000) if kind == "release" else (10_000, 400)
    stress(c_program("hc_stress"), libraries[kind, name], ops, 36 + threads, slots, threads,
           timeout=120, HCMALLOC_CHECK="1", **_env(name))


@pytest.mark.parametrize("kind,name", CASES, ids=[f"{k}-{n}" for k, n in CASES])
def test_fork_and_threads(c_program, libraries, kind, name):
    forks = 10 if kind == "release" else 4
    res = run_preloaded([c_program("hc_threads"), "fork", forks], libraries[kind, name],
                        **_env(name))
    assert res.returncode == 0 and res.stdout == f"ok fork children={forks}\n", \
        res.stdout + res.stderr[-2000:]


@pytest.mark.parametrize("kind", ["release", "debug"])
def test_double_free_of_a_fitted_class_aborts(c_program, libraries, kind):
    fit, _ = TABLES["random-align8"]
    size = next(c for c in fit.table if c % 16)      # an 8-byte aligned class
    res = run_preloaded([c_program("hc_pages"), "doublefree", size], libraries[kind, "random-align8"])
    assert res.returncode < 0 and "double free" in res.stderr, res.stdout + res.stderr


def test_usable_size_is_the_fitted_class(libraries, tmp_path):
    """A request just at a fitted class gets exactly that class (release: no red zone)."""
    import sys
    fit, _ = TABLES["adversarial"]
    code = ("import ctypes, sys\nc = ctypes.CDLL(None)\nc.malloc.restype = ctypes.c_void_p\n"
            "c.malloc_usable_size.argtypes = [ctypes.c_void_p]\n"
            "print(*[c.malloc_usable_size(c.malloc(int(n))) for n in sys.argv[1:]])\n")
    res = run_preloaded([sys.executable, "-c", code, *fit.table], libraries["release", "adversarial"])
    assert res.returncode == 0, res.stderr[-2000:]
    assert list(map(int, res.stdout.split())) == fit.table
    assert re.fullmatch(r"[0-9 ]+\n", res.stdout)


def test_page_size_per_class(c_program, libraries):
    """SMALL_PAGE_BLOCKS=8: a class of small blocks lays them on a 4 KiB page (the smallest
    power of two from an OS page that holds 8), so 1,000 blocks take that many pages."""
    import json
    res = run_preloaded([c_program("hc_stats"), "page-threads"], libraries["release", "adversarial"])
    assert res.returncode == 0, res.stdout + res.stderr[-2000:]
    d = next(r for r in map(json.loads, res.stdout.splitlines()) if r["phase"] == "pages-malloc")
    d = d["delta"]
    size = d["bytes_total"] // 1000             # the class malloc(100) takes under this table
    assert d["allocs_total"] == 1000 and 100 <= size <= 128
    assert d["small_pages"] == -(-1000 // (4096 // size)), d
