"""HC's statistics (MONITOR, Hasan & Chang 2006 §3.11) after known call sequences, on the
paper-generic preset (Table 6 as printed: the small pages of SMALL_MAX take no part).

tests/c/hc_stats.c runs fixed phases and prints how each moved every counter of hc_stats.h;
here the moves are held to the allocator's rules: 4-byte headers and 16-byte block steps
(§3.1, 64-bit port), quick lists with preallocation (§3.10), LIFO medium lists (§3.4), mmap for
huge blocks (§3.2), realloc in place (§3.12), complete coalescing from free (§3.11). Counters
marked [always] in hc_stats.h must be right with MONITOR off too.
"""

import json
import re
import subprocess

import pytest

from conftest import ROOT, preload_env
from hctune import knobs

# The struct's layout version, as the header declares it (each new counter bumps it).
STATS_VERSION = int(re.search(r"#define HC_STATS_VERSION (\d+)",
                              (ROOT / "allocator" / "hc" / "hc_stats.h").read_text()).group(1))

ALWAYS = {"version", "monitor", "allocs_current", "allocs_max", "bytes_current", "bytes_max",
          "footprint", "heap_bytes", "mapped_bytes", "mapped_blocks"}


def phases(program, library):
    res = subprocess.run([str(program)], capture_output=True, text=True, timeout=60,
                         env=preload_env(library))
    assert res.returncode == 0, res.stdout + res.stderr
    out = {}
    for line in res.stdout.splitlines():
        rec = json.loads(line)
        out[rec["phase"]] = rec
    return out


def check_invariants(ph):
    for name, rec in ph.items():
        a, d = rec["after"], rec["delta"]
        assert a["version"] == STATS_VERSION, name
        assert a["footprint"] >= a["heap_bytes"] + a["mapped_bytes"], name
        assert a["bytes_max"] >= a["bytes_current"] and a["allocs_max"] >= a["allocs_current"]
        assert d["footprint"] >= 0, f"{name}: the footprint is a high-water mark"


@pytest.fixture(scope="module")
def generic(hc_library, c_program):
    return phases(c_program("hc_stats"), hc_library(knobs.preset("paper-generic")))


def test_small_blocks_and_quick_lists(generic):
    check_invariants(generic)
    d = generic["malloc-small"]["delta"]
    assert (d["allocs_current"], d["allocs_total"], d["frees"]) == (100, 100, 0)
    # malloc(40) is a 48-byte block: 40 + the 4-byte header, rounded up to 16 (§3.1).
    assert (d["bytes_current"], d["bytes_total"]) == (4800, 4800)
    d = generic["free-small"]["delta"]
    assert (d["allocs_current"], d["bytes_current"], d["frees"], d["allocs_total"]) == \
        (-100, -4800, 100, 0)
    d = generic["malloc-small-again"]["delta"]
    assert d["ql_hits"] == 100, "freed small blocks go back onto their quick list (§3.10)"
    assert (d["splits"], d["wilderness_grows"], d["heap_bytes"], d["footprint"]) == (0, 0, 0, 0)


def test_quick_list_refill_preallocates(generic):
    """An empty quick list is refilled by splitting a free block; the remainder is carved into
    blocks of the requested size and preallocated into the quick list (§3.6, §3.10)."""
    d = generic["ql-refill"]["delta"]
    assert d["allocs_current"] == 50 and d["bytes_current"] == 50 * 64
    assert d["splits"] >= 1 and d["ql_refills"] >= 1
    assert d["ql_prealloc_blocks"] >= 40, "a 4000-byte block holds ~60 blocks of 64 bytes"
    assert d["ql_hits"] >= 45, "after the refill the quick list serves the rest"
    assert d["wilderness_allocs"] == 0, "the wilderness is the last resort (§3.9)"


def test_medium_lists_are_lifo(generic):
    rec = generic["medium-lifo"]
    assert rec["facts"]["same_block"] == 1, "the freed 512-byte block comes back first (§3.4)"
    assert rec["delta"]["allocs_current"] == 3 and rec["delta"]["bytes_current"] == 3 * 512
    assert rec["delta"]["list_hits"] >= 1


def test_huge_blocks_are_mapped(generic):
    d = generic["mmap-alloc"]["delta"]
    assert (d["mmaps"], d["mapped_blocks"], d["allocs_current"]) == (1, 1, 1)
    assert 300 * 1024 < d["mapped_bytes"] <= 300 * 1024 + 64 * 1024  # whole MMAP_UNITs
    assert d["bytes_current"] == d["mapped_bytes"], "mmapped blocks count whole mappings"
    d2 = generic["mmap-free"]["delta"]
    assert (d2["mapped_blocks"], d2["mapped_bytes"], d2["allocs_current"]) == \
        (-1, -d["mapped_bytes"], -1), "freed huge blocks are unmapped at once (§3.2)"


def test_realloc_in_place(generic):
    rec = generic["realloc-grow"]
    assert rec["facts"]["kept"] == 1
    assert rec["delta"]["reallocs"] == 1
    if not rec["facts"]["adjacent"]:
        pytest.skip("the two 1000-byte blocks were not neighbours in this heap")
    assert rec["facts"]["same_block"] == 1, "grown into the free neighbour (§3.12)"
    assert rec["delta"]["realloc_in_place"] == 1


def test_other_calls_counted(generic):
    assert generic["other-calls"]["facts"]["all"] == 1
    d = generic["other-calls"]["delta"]
    assert (d["allocs_current"], d["allocs_total"]) == (3, 3)
    d = generic["other-frees"]["delta"]
    assert (d["allocs_current"], d["frees"]) == (-3, 3)


@pytest.mark.parametrize("in_free", [0, 1])
def test_coalesce_in_free(hc_library, c_program, in_free):
    setting = knobs.resolve("paper-generic", [f"COALESCE_IN_FREE={in_free}"])
    ph = phases(c_program("hc_stats"), hc_library(setting))
    check_invariants(ph)
    rec = ph["in-free"]
    if in_free == 0:
        assert rec["delta"]["coalesce_in_free"] == 0
        return
    assert rec["facts"]["live_before"] < setting["IN_FREE_BLOCKS"], "test needs a quiet heap"
    assert rec["delta"]["coalesce_in_free"] >= 1, "heap > IN_FREE_HEAP, live < IN_FREE_BLOCKS"


def test_always_kept_without_monitor(hc_library, c_program):
    """MONITOR=0 (the Table 7 builds): [always] counters still right, the rest stay 0."""
    ph = phases(c_program("hc_stats"), hc_library(knobs.preset("p2c-perf")))
    check_invariants(ph)
    assert ph["malloc-small"]["after"]["monitor"] == 0
    d = ph["malloc-small"]["delta"]
    assert (d["allocs_current"], d["bytes_current"]) == (100, 4800)
    d = ph["mmap-alloc"]["delta"]
    assert (d["mapped_blocks"], d["allocs_current"]) == (1, 1)
    for rec in ph.values():
        moved = {k for k, v in rec["delta"].items() if v and k not in ALWAYS}
        assert not moved, f"{rec['phase']}: monitor-only counters moved: {moved}"


def test_page_blocks_counted(hcmalloc_so, c_program):
    """The small pages' blocks (generic preset, SMALL_MAX) count in the totals and the maxima
    too (hc_page.c, "counts"), across threads: blocks freed by another thread, blocks of an
    exited thread freed by main, realloc moving a block between classes (one realloc, not an
    allocation and a free, as the heap counts it)."""
    res = subprocess.run([str(c_program("hc_stats")), "page-threads"], capture_output=True,
                         text=True, timeout=60, env=preload_env(hcmalloc_so))
    assert res.returncode == 0, res.stdout + res.stderr
    ph = {rec["phase"]: rec for rec in map(json.loads, res.stdout.splitlines())}
    check_invariants(ph)
    assert ph["pages-malloc"]["after"]["small_pages"] >= 2, "malloc(100) is served by pages"
    d, a = ph["pages-malloc"]["delta"], ph["pages-malloc"]["after"]
    # malloc(100) takes the 112-byte class (16-byte steps to 128)
    assert (d["allocs_current"], d["allocs_total"], d["frees"]) == (1000, 1000, 0)
    assert (d["bytes_current"], d["bytes_total"]) == (112000, 112000)
    assert a["allocs_max"] >= 1000 and a["bytes_max"] >= 112000
    for phase in ("pages-remote-free", "pages-orphan-free"):
        d = ph[phase]["delta"]
        assert (d["allocs_current"], d["bytes_current"]) == (-1000, -112000), phase
        assert 1000 <= d["frees"] <= 1005 and d["allocs_total"] <= 5, phase
    rec = ph["pages-realloc"]
    assert rec["facts"]["moved"] == 1
    d = rec["delta"]
    assert (d["allocs_total"], d["frees"], d["allocs_current"]) == (1000, 1000, 0)
    assert d["bytes_total"] == 1000 * (112 + 320)
    # the peak: every block moved to 320 bytes, the last 112-byte one freed
    assert rec["after"]["bytes_max"] >= 320000
