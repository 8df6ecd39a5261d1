"""Each policy knob of HC does what Hasan & Chang 2006 §3 says, seen through the statistics.

tests/c/hc_stats.c runs one scenario per process (a fresh heap), built with the knob on and off
(MONITOR on, so every counter is kept); the test compares the two builds.
"""

import json
import subprocess

import pytest

from conftest import preload_env
from hctune import knobs

NO_COALESCING = ["COALESCE=0", "COALESCE_QL=0"]


@pytest.fixture(scope="module")
def scenario(c_program, hc_library):
    program = c_program("hc_stats")

    def run(name, sets=(), *args):
        library = hc_library(knobs.resolve("paper-generic", list(sets)))
        res = subprocess.run([str(program), name, *map(str, args)], capture_output=True,
                             text=True, timeout=60, env=preload_env(library))
        assert res.returncode == 0, res.stdout + res.stderr
        return {rec["phase"]: rec for rec in map(json.loads, res.stdout.splitlines())}

    return run


def test_coalesce_ql_reuses_quick_list_blocks(scenario):
    """§3.8: 20,000 freed 32-byte quick-list blocks (640 KB) serve 200 2000-byte requests after
    a complete coalescing; without COALESCE_QL the wilderness grows by all 400 KB."""
    on = scenario("coalesce-ql")["coalesce-ql"]["delta"]
    off = scenario("coalesce-ql", ["COALESCE_QL=0"])["coalesce-ql"]["delta"]
    assert on["coalesce_complete"] >= 1 and off["coalesce_complete"] == 0
    assert off["footprint"] >= 200 * 2000
    assert on["footprint"] <= 100 * 1024, on


def test_split_uses_a_free_big_block(scenario):
    """§3.6: with SPLIT, medium requests are cut from a free 8000-byte block; without it (and
    without coalescing) they come from the wilderness (§3.9)."""
    on = scenario("split")["split"]
    off = scenario("split", ["SPLIT=0", *NO_COALESCING])["split"]
    assert on["facts"]["inside"] == 1 and on["delta"]["splits"] >= 1
    assert on["delta"]["wilderness_allocs"] == 0
    assert off["facts"]["inside"] == 0 and off["delta"]["splits"] == 0
    assert off["delta"]["wilderness_allocs"] >= 1


def test_one_granule_more_is_not_split(scenario):
    """§3.8: a block one granule (16 bytes) bigger than asked is handed out whole; two granules
    bigger is split."""
    ph = scenario("fit")
    one, two = ph["fit-plus-one"], ph["fit-plus-two"]
    assert one["facts"] == {"same_block": 1, "usable": 512 - 4}
    assert one["delta"]["splits"] == 0 and one["delta"]["bytes_current"] == 512
    assert two["facts"] == {"same_block": 1, "usable": 496 - 4}
    assert two["delta"]["splits"] == 1 and two["delta"]["bytes_current"] == 496


def test_incremental_coalescing_merges_neighbours(scenario):
    """§3.7: four freed adjacent 512-byte blocks are merged to serve a 1504-byte request."""
    on = scenario("incremental")["incremental"]
    if not on["facts"]["adjacent"]:
        pytest.skip("the four blocks were not neighbours in this heap")
    assert on["facts"]["reused"] == 1 and on["delta"]["coalesce_incremental"] >= 1
    off = scenario("incremental", NO_COALESCING)["incremental"]
    assert off["facts"]["reused"] == 0 and off["delta"]["coalesce_incremental"] == 0


@pytest.mark.parametrize("threshold", [102400, 16384])
def test_mmap_threshold(scenario, threshold):
    """§3.2: requests above MMAP_THRESHOLD get their own mapping; the threshold itself does not."""
    ph = scenario("mmap-threshold", [f"MMAP_THRESHOLD={threshold}"], threshold)
    assert ph["mmap-at-threshold"]["delta"]["mmaps"] == 0
    assert ph["mmap-above-threshold"]["delta"]["mmaps"] == 1
    assert ph["mmap-above-threshold"]["delta"]["mapped_blocks"] == 1


@pytest.mark.parametrize("unit", [8192, 65536])
def test_wilderness_grows_in_heap_units(scenario, unit):
    """§3.9: the heap is taken from the OS in multiples of HEAP_UNIT."""
    d = scenario("heap-unit", [f"HEAP_UNIT={unit}"])["heap-unit"]["delta"]
    assert d["wilderness_grows"] >= 1 and d["heap_bytes"] > 0
    assert d["heap_bytes"] % unit == 0
    assert d["wilderness_grows"] <= d["heap_bytes"] // unit
