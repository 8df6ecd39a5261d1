"""The emitted malloc.c (hctune.render, templates/malloc.c.j2): rendering, the knob blocks and
their documentation from configs/knobs.toml, compiling with gcc and clang under -Werror (object
and shared library), a program linked with it, -D overrides, and the render command line."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest

from hctune import knobs, paths
from hctune.render import render_malloc

STRICT = ["-O2", "-std=c11", "-Wall", "-Wextra", "-Werror"]
COMPILERS = [cc for cc in ("gcc", "clang") if shutil.which(cc)]


def compile_c(cc, source, tmp_path, *extra, name="malloc"):
    src = tmp_path / f"{name}.c"
    src.write_text(source)
    out = tmp_path / f"{name}.out"
    res = subprocess.run([cc, *STRICT, *extra, str(src), "-o", str(out)],
                         capture_output=True, text=True)
    assert res.returncode == 0, f"{cc} {' '.join(extra)} failed:\n{res.stderr[-3000:]}"
    return out


@pytest.mark.parametrize("name", knobs.preset_names())
def test_every_preset_renders_with_its_knobs(name):
    setting = knobs.preset(name)
    text = render_malloc(setting)
    # One #ifndef/#define/#endif block per knob, in knobs.toml order, with the preset's value.
    blocks = re.findall(r"#ifndef (\w+)\n#define (\w+) (\S+)\n#endif /\* (\w+) \*/", text)
    assert [b[0] for b in blocks][: len(setting)] == list(knobs.knobs())
    for (name1, name2, value, name3), (knob, expected) in zip(blocks, knobs.defines(setting)):
        assert name1 == name2 == name3 == knob and value == expected
    # The documentation header names every knob as "NAME default: VALUE" with its section.
    for knob in knobs.knobs().values():
        default = knobs.c_value(knob, knob.default)
        assert re.search(rf"\* {knob.name} default: {re.escape(default)}\b", text), knob.name
        cite = "Hasan & Chang 2006, " if knob.section.startswith("§") else "beyond the paper, "
        assert f"[{cite}{knob.section}" in text
    assert not re.search(r'#\s*include\s+"', text), "local includes must be inlined"
    assert "/work/" not in text and str(paths.ROOT) not in text


def test_changed_knobs_are_marked_in_the_header():
    text = render_malloc(knobs.resolve("generic", ["QL_HIGH=264", "SPLIT=0"]))
    assert "QL_HIGH default: 72   (this file: 264)" in text
    assert "SPLIT default: 1   (this file: 0)" in text
    assert "COALESCE default: 1\n" in text


def test_provenance_in_the_header():
    text = render_malloc(knobs.preset("generic"),
                         provenance={"trace": "gawk.hct", "objective": "mem",
                                     "measured": {"footprint": 123456}})
    head = text.split("*/", 1)[0]
    assert "trace:" in head and "gawk.hct" in head
    assert "footprint=123456" in head and "hctune:" in head and "date:" in head
    assert "Provenance" not in render_malloc(knobs.preset("generic")).split("*/", 1)[0]


def test_debug_render_defines_hc_debug():
    assert "#define HC_DEBUG 1" in render_malloc(knobs.preset("generic"), debug=True)
    assert "#define HC_DEBUG 1" not in render_malloc(knobs.preset("generic"))


@pytest.mark.parametrize("cc", COMPILERS)
@pytest.mark.parametrize("debug", [False, True], ids=["release", "debug"])
def test_compiles_strict_as_object_and_shared(cc, debug, tmp_path):
    source = render_malloc(knobs.preset("generic"), debug=debug)
    compile_c(cc, source, tmp_path, "-c")
    compile_c(cc, source, tmp_path, "-shared", "-fPIC")


# Every preset, and each mechanism switched off alone, must build warning-free: a knob that
# leaves a function unused or a variable unset is a -Werror failure for the user.
VARIANTS = [knobs.preset(n) for n in knobs.preset_names()] + [
    knobs.resolve("generic", [f"{k}={v}"]) for k, v in
    [("SPLIT", 0), ("COALESCE", 0), ("COALESCE_QL", 0), ("COALESCE_IN_FREE", 1), ("MONITOR", 0),
     ("QL_PREALLOC", 0), ("QL_HIGH", 16), ("QL_HIGH", 1016),
     ("HEAP_LAZY", 0), ("MMAP_THRESHOLD_MAX", 0), ("DECAY_MS", 0)]]


@pytest.mark.parametrize("setting", VARIANTS, ids=[knobs.key(s) for s in VARIANTS])
def test_every_variant_compiles_strict(setting, tmp_path):
    cc = COMPILERS[len(knobs.key(setting)) % len(COMPILERS)]  # spread over both compilers
    compile_c(cc, render_malloc(setting), tmp_path, "-c")


def run_app(cc, source, tmp_path, *defines, args=()):
    """render_app.c linked with the rendered malloc.c, as in `cc -O2 app.c malloc.c`.  The app
    is built with -fno-builtin: clang otherwise assumes a malloc call leaves errno alone and
    folds the program's errno checks away (malloc.c itself gets the user's plain flags)."""
    (tmp_path / "malloc.c").write_text(source)
    out = tmp_path / "app"
    app = paths.ROOT / "tests" / "c" / "render_app.c"
    steps = [[cc, *STRICT, *defines, "-c", str(tmp_path / "malloc.c"), "-o", str(tmp_path / "m.o")],
             [cc, *STRICT, "-fno-builtin", "-I", str(paths.ALLOCATOR / "hc"), "-c", str(app),
              "-o", str(tmp_path / "app.o")],
             [cc, str(tmp_path / "app.o"), str(tmp_path / "m.o"), "-o", str(out)]]
    for cmd in steps:
        res = subprocess.run(cmd, capture_output=True, text=True)
        assert res.returncode == 0, res.stderr[-3000:]
    run = subprocess.run([str(out), *args], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
    return {k: int(v) for k, v in (line.split() for line in run.stdout.splitlines())}


@pytest.mark.parametrize("cc", COMPILERS)
def test_linked_program_uses_the_baked_setting(cc, tmp_path):
    # paper-generic: no small pages (SMALL_MAX=0); the paper's heap counts every call
    stats = run_app(cc, render_malloc(knobs.preset("paper-generic")), tmp_path)
    assert stats["monitor"] == 1 and stats["allocs_total"] >= 6
    assert stats["allocs_current"] == 0 and stats["bytes_current"] == 0
    assert stats["mmaps"] >= 1 and stats["footprint"] >= 1 << 20


def test_dash_d_overrides_the_baked_values(tmp_path):
    source = render_malloc(knobs.preset("paper-generic"))  # MONITOR=1, QL_HIGH=72, no small pages
    base = run_app(COMPILERS[0], source, tmp_path)
    # QL_HIGH=72: the 208-byte block is medium, so the second malloc(200) is a list hit.
    assert base["ql_hits"] == 0 and base["list_hits"] >= 1
    more = run_app(COMPILERS[0], source, tmp_path, "-DQL_HIGH=264")
    assert more["ql_hits"] >= 1, "with -DQL_HIGH=264 the 208-byte block is on a quick list"
    off = run_app(COMPILERS[0], source, tmp_path, "-DMONITOR=0")
    assert off["monitor"] == 0 and off["allocs_total"] == 0 and off["ql_hits"] == 0
    assert off["footprint"] > 0 and off["bytes_max"] > 0, "kept even without MONITOR (§3.11)"


def render_cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "hctune.render", *args], capture_output=True,
                          text=True, cwd=cwd)


def test_render_command_writes_the_file(tmp_path):
    out = tmp_path / "sub" / "malloc.c"
    res = render_cli("--preset", "gawk-mem", "--set", "QL_PREALLOC=10", "--debug", "-o", str(out))
    assert res.returncode == 0, res.stderr
    text = out.read_text()
    assert "#define QL_HIGH 264\n" in text and "#define QL_PREALLOC 10\n" in text
    assert "#define HC_DEBUG 1" in text
    assert os.listdir(out.parent) == ["malloc.c"], "no temporary file left behind"


@pytest.mark.parametrize("args, message", [
    (["--preset", "nope"], "unknown preset"),
    (["--set", "QL_HIGH=7"], "QL_HIGH"),
    (["--set", "BOGUS=1"], "unknown knob"),
    (["--set", "SPLIT"], "KNOB=VALUE"),
])
def test_render_command_bad_input_is_one_line(tmp_path, args, message):
    out = tmp_path / "malloc.c"
    res = render_cli(*args, "-o", str(out))
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hctune: error:") and message in lines[0]
    assert not out.exists()


def test_block_layout_usable_sizes(tmp_path):
    """§3.1 ported: a 4-byte header, 16-byte steps, a 16-byte smallest block (12 usable); the
    table in docs/allocator.md, beside glibc's 8-byte header and 24-usable smallest chunk."""
    usable = run_app(COMPILERS[0], render_malloc(knobs.preset("paper-generic")), tmp_path,
                     args=["usable"])
    assert {int(k): v for k, v in usable.items()} == {
        1: 12, 12: 12, 13: 28, 24: 28, 28: 28, 40: 44, 60: 60, 100: 108, 1000: 1004}
    doc = (paths.ROOT / "docs" / "allocator.md").read_text()
    assert "| HC usable | 12 | 12 | 28 | 28 | 28 | 44 | 60 | 108 | 1004 |" in doc


def test_rendering_is_deterministic():
    """The build cache keys on the rendered source (hctune.build): without provenance the same
    setting must give byte-identical text, with no date or path in it."""
    setting = knobs.resolve("generic", ["QL_HIGH=136"])
    assert render_malloc(setting) == render_malloc(dict(setting))
    assert render_malloc(setting) != render_malloc(knobs.preset("generic"))


def test_hand_made_dash_d_values_stay_safe(tmp_path):
    """hctune checks every knob's range, but a user's own -D is not checked: a HEAP_UNIT that is
    not whole pages, a QL_HIGH past the medium sizes and a huge MMAP_THRESHOLD must still work."""
    stats = run_app(COMPILERS[0], render_malloc(knobs.preset("paper-generic")), tmp_path,
                    "-DHEAP_UNIT=1000", "-DQL_HIGH=4000", "-DMMAP_THRESHOLD=100000000000")
    assert stats["heap_bytes"] > 0 and stats["heap_bytes"] % 4096 == 0
    assert stats["ql_hits"] >= 1 and stats["allocs_current"] == 0
