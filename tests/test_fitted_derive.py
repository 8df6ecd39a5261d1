"""The derivation of fitted size classes (hctune.trace.fitted) and the emitted table's checks.

Deterministic (same profile, same table; a trace's profile the same from hctrace-tool and from
Python), bounded (never more than FIT_MAX classes, whatever the histogram), generic with one line
for a trace of no allocations or only huge blocks, the union of several traces; the emitted
malloc.c with a table compiles with -Wall -Wextra -Werror, and a malformed hand-edited table
fails to compile with a message naming the table.
"""

import random
import subprocess

import pytest

from conftest import generic_with
from hctune.build import compiler
from hctune.errors import HctuneError
from hctune.render import render_malloc
from hctune.trace import fitted
from hctune.trace.writer import Writer


def _trace(path, blocks, free_all=True):
    """blocks: sizes, all live at once (the peak), then freed (or not)."""
    with Writer(path, command="fitted-test") as w:
        for i, z in enumerate(blocks):
            w.malloc(0x10000 + 0x1000 * i, z)
        if free_all:
            for i in range(len(blocks)):
                w.free(0x10000 + 0x1000 * i)
    return path


def test_a_trace_profile_and_its_table(tmp_path):
    """2,000 blocks of 392 bytes (the generic class is 448) and 6,000 of 21: the tool and the
    Python definition agree, and 392 gets its exact class (400), at the 8-byte grain 392."""
    path = _trace(tmp_path / "a.hct", [392] * 2000 + [21] * 6000 + [100_000])
    tool = fitted.profile([path], use_tool=None)
    py = fitted.profile([path], use_tool=False)
    assert tool.sizes == py.sizes and tool.max_live_bytes == py.max_live_bytes
    assert tool.sizes[392] == (2000, 2000) and tool.sizes[21] == (6000, 6000)
    assert 392 * 2000 + 21 * 6000 + 100_000 == tool.max_live_bytes
    assert fitted.derive(tool, 0).table == [400]
    assert fitted.derive(tool, 0, grain=8).table == [24, 392]
    # deterministic: the same trace, the same table, every time
    assert fitted.derive(fitted.profile([path]), 0, grain=8).table == [24, 392]


def test_union_of_traces(tmp_path):
    a = _trace(tmp_path / "a.hct", [392] * 2000)
    b = _trace(tmp_path / "b.hct", [200] * 3000)
    u = fitted.profile([a, b])
    assert u.sizes[392] == (2000, 2000) and u.sizes[200] == (3000, 3000)
    assert fitted.derive(u, 0).table == [208, 400]


def test_no_allocations_or_only_huge_blocks_give_generic(tmp_path):
    empty = fitted.derive(fitted.profile([_trace(tmp_path / "e.hct", [])]))
    assert empty.table == [] and empty.note == "generic classes: the profile has no allocations"
    huge = fitted.derive(fitted.profile([_trace(tmp_path / "h.hct", [1 << 20] * 5, False)]))
    assert huge.table == [] and "only blocks above" in huge.note
    assert all(v == 0 for v in huge.knobs().values())


@pytest.mark.parametrize("case", ["one-size", "every-size", "random", "tiny-counts"])
def test_bounded_and_deterministic(case):
    rng = random.Random(case)
    if case == "one-size":
        sizes = {1000: (10**6, 10**6)}
    elif case == "every-size":          # the most sizes hctrace-tool can report
        sizes = {z: (1 + z % 7, 1 + z % 5) for z in range(1, 65536)}
    elif case == "random":
        sizes = {rng.randrange(1, 4097): (rng.randrange(1, 10**5), rng.randrange(0, 10**5))
                 for _ in range(2000)}
    else:                               # no size worth half a page: generic
        sizes = {z: (1, 1) for z in range(100, 4000, 37)}
    prof = fitted.Profile(sizes={k: v for k, v in sizes.items()
                                                                  if k <= fitted.LIMIT})
    for grain in (16, 8):
        for bound in (0, 5, 50):
            fits = [fitted.derive(prof, bound, n, grain=grain) for n in (0, 3, fitted.FIT_MAX)]
            assert [f.table for f in fits] == [fitted.derive(prof, bound, n, grain=grain).table
                                               for n in (0, 3, fitted.FIT_MAX)]
            assert fits[0].table == [] and len(fits[1].table) <= 3
            assert len(fits[2].table) <= fitted.FIT_MAX
            for f in fits:
                assert f.table == sorted(set(f.table))
                assert all(16 <= c <= fitted.LIMIT and c % grain == 0 for c in f.table)
                assert f.excess_after <= f.excess_before
    if case == "tiny-counts":
        assert fitted.derive(prof, 0).table == []
    with pytest.raises(HctuneError):
        fitted.derive(prof, 0, fitted.FIT_MAX + 1)


def test_generic_table_matches_the_allocators():
    """The Python copy of hc_sp_classes (generic: 4 per power of two, MID_CLASSES 16)."""
    g = fitted.generic_classes()
    assert g[:12] == [16, 32, 48, 64, 80, 96, 112, 128, 160, 192, 224, 256]
    assert 1088 in g and 2096 in g and g[-1] == 4352


def _cc(source, tmp_path):
    src = tmp_path / "malloc.c"
    src.write_text(source)
    return subprocess.run([compiler(), "-fsyntax-only", "-std=gnu11", "-pthread", "-Wall",
                           "-Wextra", "-Werror", str(src)], capture_output=True, text=True)


def test_emitted_table_compiles_strict(tmp_path):
    for extra in ({"FIT_1": 272, "FIT_2": 400}, {"FIT_ALIGN8": 1, "FIT_1": 24, "FIT_2": 392}):
        text = render_malloc(generic_with(extra))
        assert "static const uint32_t hc_fit_table" in text
        r = _cc(text, tmp_path)
        assert r.returncode == 0, r.stderr[-2000:]


@pytest.mark.parametrize("edit", ["#define FIT_1 24", "#define FIT_1 400\n#define FIT_2 272",
                                  "#define FIT_1 0\n#define FIT_2 272", "#define FIT_1 8192"])
def test_malformed_table_fails_to_compile_naming_it(tmp_path, edit):
    """A hand edit: the defines put before the knobs' own #ifndef blocks (as -D would)."""
    text = render_malloc(generic_with({"FIT_1": 272}))
    r = _cc(edit + "\n" + text.replace("#define FIT_1 272", "", 1), tmp_path)
    assert r.returncode != 0
    assert "the fitted class table FIT_1 .. FIT_8" in r.stderr, r.stderr[-2000:]


def test_bad_input_one_line_exit_2(tmp_path, capsys):
    """The command line: a missing trace or a grain other than 8 or 16 is one line, exit 2."""
    assert fitted.main([str(tmp_path / "missing.hct")]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    path = _trace(tmp_path / "a.hct", [392] * 2000)
    assert fitted.main(["--grain", "12", str(path)]) == 2
    assert "grain" in capsys.readouterr().err
    assert fitted.main([str(path)]) == 0
    assert capsys.readouterr().out == "FIT_1=400\n"
