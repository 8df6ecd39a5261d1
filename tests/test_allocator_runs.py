"""Mid sizes as runs of granules on pages shared by every size (allocator/hc/hc_run.c, MID_RUNS).

- Sizes share pages: eight mid sizes allocated one after another, 7 of 8 freed, then a ninth
  size: with the runs it takes no new page (the holes of the others serve it), without them it
  takes a page per 64 KiB of its blocks (counted from HC's statistics, tests/c/hc_runs.c).
- realloc grows into the free granules after a block and shrinks in place (same pointer,
  contents kept), and moves a block whose next granules are in use.
- The owner's double free (tests/c/hc_pages.c doublefree 1000, the class pages' program) and a
  free inside a block abort with one line; another thread's double free aborts when the owner
  merges its frees.
- A thread's run pages orphaned at its exit are adopted by another thread, which allocates into
  their holes with every block's contents intact; after all is freed and malloc_trim, the
  102 pages are empty but for at most two (glibc's blocks for its cached thread stacks).
- Also in tests/test_allocator_pages.py: two settings with runs in the stress matrix (release
  and debug, 1 and 4 threads), the every-size test, the thread tests (handback, orphans,
  10,000 threads, ring and fork, double and misaligned free), the strict compile.
"""

import re

import pytest

from conftest import generic_with, run_preloaded

RUNS = {"SMALL_MAX": 4096, "MID_CLASSES": 16, "MID_RUNS": 256}


@pytest.fixture(scope="module", params=[False, True], ids=["release", "debug"])
def runs_library(request, hc_library):
    return hc_library(generic_with(RUNS), debug=request.param)


def test_sizes_share_pages(c_program, hc_library):
    got = {}
    for runs in (0, 256):
        lib = hc_library(generic_with(dict(RUNS, MID_RUNS=runs)))
        res = run_preloaded([c_program("hc_runs"), "share"], lib)
        assert res.returncode == 0, res.stdout + res.stderr[-2000:]
        m = re.fullmatch(r"ok share new_pages=(\d+) run_pages=(\d+)\n", res.stdout)
        assert m, res.stdout
        got[runs] = (int(m.group(1)), int(m.group(2)))
    # 1,500 blocks of 1,800 bytes: MID_CLASSES=16's class stretched to 1,808 (36 a page), 42 pages
    assert got[0] == (42, 0), got
    # the holes left by the other sizes serve all of them; the eight sizes' 1,500 x 8 blocks
    # took their run pages before
    assert got[256][0] == 0 and got[256][1] > 0, got


def test_realloc_in_place(c_program, runs_library):
    res = run_preloaded([c_program("hc_runs"), "inplace"], runs_library)
    assert res.returncode == 0 and res.stdout == "ok inplace\n", res.stdout + res.stderr[-2000:]


@pytest.mark.parametrize("argv,message", [(("hc_pages", "doublefree", "1000"), "double free"),
                                          (("hc_runs", "interior"), "invalid pointer"),
                                          (("hc_runs", "remotedouble"), "double free")],
                         ids=["doublefree", "interior", "remotedouble"])
def test_misuse_aborts(c_program, runs_library, argv, message):
    res = run_preloaded([c_program(argv[0]), *argv[1:]], runs_library)
    assert res.returncode < 0 and message in res.stderr, res.stdout + res.stderr[-2000:]
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr


def test_orphaned_run_pages_adopted(c_program, runs_library):
    res = run_preloaded([c_program("hc_runs"), "adopt"], runs_library)
    assert res.returncode == 0 and res.stdout == "ok adopt pages_in_use=few\n", \
        res.stdout + res.stderr[-2000:]
