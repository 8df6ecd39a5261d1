"""Each layer off is the paper's allocator, exactly (issue 17).

The layers added for issue 17 (small pages: SMALL_MAX; the address-ordered big list:
BIG_AO_FIT; populated callocs: CALLOC_POPULATE; calloc's kept mappings: CALLOC_MMAP; mapping
units: MMAP_UNIT) each sit behind a knob whose off value is meant to
leave HC as it was.  With all of them off, two deterministic single-threaded programs must give,
counter for counter, the HCMALLOC_STATS that the generic build of commit 32a9840 (the last before
the layers) gave: tests/golden/paper_path_stats.txt.  The counters (quick-list hits and refills,
medium- and big-list hits, splits, coalescing runs, wilderness grows, footprint, reallocs in
place) move when any decision of the paper's path changes, so a layer that leaks into it is
caught.  Counts, not times: a second or two in all.
"""

import re
import subprocess

import pytest

from conftest import PROGRAM_FLAGS, ROOT, _compile_cached, preload_env
from hctune import knobs

GOLDEN = ROOT / "tests" / "golden" / "paper_path_stats.txt"
LAYERS_OFF = ["SMALL_MAX=0", "MID_CLASSES=0", "BIG_AO_FIT=0", "CALLOC_POPULATE=0", "CALLOC_MMAP=0",
              "MMAP_UNIT=0", "CALLOC_SHRINK=0", "SMALL_EMPTY=0", "SMALL_YIELD=0",
              "SMALL_IDLE=0", "SMALL_P2_HEADER=0", "REMOTE_KEEP=0", "REMOTE_BATCH=0", "MID_RUNS=0",
              "BIG_CACHE=0", "SMALL_HEADERS_APART=0"]
CLOCK_OFF = ["DECAY_MS=0"]  # the decay coalesces by the clock: its counters would not repeat


def golden() -> dict[str, dict[str, int]]:
    """{"churn_words 30000": {counter: value}, ...}"""
    out, cur = {}, None
    for line in GOLDEN.read_text().splitlines():
        if line.startswith("#") or not line.strip():
            continue
        if line.startswith("["):
            cur = out.setdefault(line.strip("[]"), {})
        else:
            name, value = line.split()
            cur[name] = int(value)
    return out


def program(name: str, c_program):
    if name == "churn_words":
        source = (ROOT / "bench" / "churn_words.c").read_text()
        return _compile_cached("bin", "churn_words", source, PROGRAM_FLAGS, "churn_words")
    return c_program(name)


@pytest.mark.parametrize("run", list(golden()))
def test_layers_off_give_the_papers_counters(run, c_program, hc_library, tmp_path):
    name, *args = run.split()
    lib = hc_library(knobs.resolve("generic", LAYERS_OFF + CLOCK_OFF))
    out = tmp_path / "stats"
    res = subprocess.run([str(program(name, c_program)), *args], capture_output=True, text=True,
                         timeout=120, env=preload_env(lib, HCMALLOC_STATS=str(out)))
    assert res.returncode == 0, res.stderr[-2000:]
    got = {k: int(v) for k, v in re.findall(r"^(\w+) (\d+)$", out.read_text(), re.M)}
    want = golden()[run]
    differ = {k: (want[k], got.get(k)) for k in want if got.get(k) != want[k]}
    assert not differ, f"{run}: counters (paper's, today's) differ: {differ}"
    # the layers' own counters stay at zero
    assert got["small_pages"] == 0
    assert got["big_cache_hits"] == 0
