"""Randomized stress (tests/c/hc_stress.c) over every policy combination of HC.

Every combination of the four boolean policies — SPLIT (§3.6), COALESCE (§3.7), COALESCE_QL
(§3.8), COALESCE_IN_FREE (§3.11) — times QL_HIGH in {16, 72, 256, 1016} (§3.4, §3.10), and at
QL_HIGH 72 also with the paper's best-fit big list (BIG_AO_FIT=0), is built
with the debug checks on (the whole heap and every list are checked after each call) and run
for a few seconds of mixed calls. The release build of a few presets then runs ~a million calls.
glibc runs the same program first, as the reference the test itself is right.
"""

import itertools
import re
import subprocess

import pytest

from conftest import build_hc_libraries, prefetch_hc_libraries, preload_env
from hctune import knobs

POLICIES = ["SPLIT", "COALESCE", "COALESCE_QL", "COALESCE_IN_FREE"]
QL_HIGHS = [16, 72, 256, 1016]
MATRIX = [dict(zip(POLICIES, bits), QL_HIGH=ql)
          for ql in QL_HIGHS for bits in itertools.product((0, 1), repeat=len(POLICIES))]
# The matrix above runs the big list in address order (BIG_AO_FIT=1, the default, hc_big.c);
# the paper's best-fit big list is checked over every policy combination at the paper's QL_HIGH.
MATRIX += [dict(zip(POLICIES, bits), QL_HIGH=72, BIG_AO_FIT=0)
           for bits in itertools.product((0, 1), repeat=len(POLICIES))]
# Debug runs: the heap walk after each call is O(heap), so a few hundred live blocks and tens of
# thousands of calls keep each run to seconds while still reaching every path.
DEBUG_OPS, DEBUG_SLOTS = 30_000, 400
RELEASE_OPS, RELEASE_SLOTS = 1_000_000, 2000


def ident(setting):
    big = "" if setting.get("BIG_AO_FIT", 1) else "-bestfit"
    return "ql{QL_HIGH}-s{SPLIT}c{COALESCE}q{COALESCE_QL}f{COALESCE_IN_FREE}".format(**setting) + big


def run_stress(program, library, ops, seed, slots, timeout=120):
    # HCMALLOC_CHECK=1: the debug builds walk the whole heap after every call (release ignores it)
    res = subprocess.run([str(program), str(ops), str(seed), str(slots)], capture_output=True,
                         text=True, timeout=timeout, env=preload_env(library, HCMALLOC_CHECK="1"))
    assert res.returncode == 0, f"exit {res.returncode}\n{res.stdout}{res.stderr[-3000:]}"
    assert re.fullmatch(rf"ok ops={ops} allocs=\d+ reallocs=\d+ frees=\d+\n", res.stdout), res.stdout
    return res


@pytest.fixture(scope="module")
def debug_libraries():
    """All matrix settings built once (os.cpu_count() at a time), keyed by their test id; the
    release presets' and the knob edges' builds then start behind them, while the matrix runs."""
    settings = [knobs.complete(dict(knobs.preset("generic"), **m)) for m in MATRIX]
    futures = prefetch_hc_libraries(settings, debug=True)
    prefetch_hc_libraries([knobs.resolve(p, s) for p, s in RELEASES])
    prefetch_hc_libraries([knobs.resolve("generic", sets) for sets in EDGES], debug=True)
    return dict(zip(map(ident, MATRIX), (f.result() for f in futures)))


def test_stress_glibc_reference(c_program):
    run_stress(c_program("hc_stress"), None, RELEASE_OPS, 1, RELEASE_SLOTS)


@pytest.mark.parametrize("setting", MATRIX, ids=ident)
def test_stress_debug_matrix(c_program, debug_libraries, setting):
    seed = MATRIX.index(setting) + 1
    run_stress(c_program("hc_stress"), debug_libraries[ident(setting)], DEBUG_OPS, seed,
               DEBUG_SLOTS)


RELEASES = [("generic", []), ("generic", ["BIG_AO_FIT=0"]), ("generic", ["BIG_CACHE=1048576"]),
            ("p2c-mem", []), ("p2c-perf", []), ("gawk-mem", [])]


@pytest.mark.parametrize("preset,sets", RELEASES)
def test_stress_release(c_program, hc_library, preset, sets):
    """Table 6 and a spread of Table 7 rows (Hasan & Chang 2006), optimised, a million calls;
    generic also with the paper's best-fit big list."""
    library = hc_library(knobs.resolve(preset, sets))
    # glibc does this in about 1.5 s; 60 s leaves room for a loaded machine, not for a
    # super-linear allocator.
    run_stress(c_program("hc_stress"), library, RELEASE_OPS, 7, RELEASE_SLOTS, timeout=60)


# The numeric knobs at the ends of their legal ranges (configs/knobs.toml), debug-checked.
EDGES = [
    ["QL_PREALLOC=0"], ["QL_PREALLOC=4096", "QL_HIGH=1016"],
    ["HEAP_UNIT=4096"], ["HEAP_UNIT=16777216"],
    ["MMAP_THRESHOLD=4096"], ["MMAP_THRESHOLD=268435456"],
    ["COALESCE_RATIO=1.0"], ["COALESCE_RATIO=4.0"],
    ["COALESCE_IN_FREE=1", "IN_FREE_BLOCKS=1000000", "IN_FREE_HEAP=0"],
    ["COALESCE_IN_FREE=1", "IN_FREE_BLOCKS=0"],
    ["MONITOR=0", "QL_HIGH=16", "SPLIT=0"],
    # BIG_CACHE (hc_bigcache.c): kept big blocks, with the tree and with the paper's big list
    ["BIG_CACHE=1048576"], ["BIG_CACHE=2080", "BIG_AO_FIT=0"],
    ["BIG_CACHE=67108864", "SMALL_MAX=0", "COALESCE_IN_FREE=1"],
]


@pytest.fixture(scope="module")
def edge_libraries():
    settings = [knobs.resolve("generic", sets) for sets in EDGES]
    return dict(zip(map(",".join, EDGES), build_hc_libraries(settings, debug=True)))


@pytest.mark.parametrize("sets", EDGES, ids=",".join)
def test_stress_knob_edges(c_program, edge_libraries, sets):
    run_stress(c_program("hc_stress"), edge_libraries[",".join(sets)], DEBUG_OPS, 5, DEBUG_SLOTS)


def test_stress_made_debug_library(c_program, hcmalloc_debug_so):
    """The debug library `make` builds, with a larger live set than the matrix runs."""
    run_stress(c_program("hc_stress"), hcmalloc_debug_so, 10_000, 99, 2000)


@pytest.mark.parametrize("fault,message", [
    ("calloc", "calloc: memory not zeroed"),
    ("realloc", "realloc did not keep the old contents"),
    ("align", "not 16-byte aligned"),
])
def test_stress_catches_a_broken_allocator(c_program, fault, message):
    """The checks are live: a deliberately wrong allocator (tests/c/hc_broken.c) fails them."""
    broken = c_program("hc_broken", ("-fPIC", "-shared"))
    res = subprocess.run([str(c_program("hc_stress")), "100000", "3", "500"], capture_output=True,
                         text=True, timeout=60, env=preload_env(broken, HC_BROKEN=fault))
    assert res.returncode == 1 and message in res.stdout, res.stdout + res.stderr
