"""configs/build.toml is the one statement of how hctune compiles its C: the Makefile's commands
(`make -n`) agree with it, and the .so `hctune emit --so` gives the user (and the emitted
malloc.mk's hcmalloc-so) holds the same code as the search's measured build of that setting
(equal .text)."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from search_support import hctune
from hctune import allocators, build, knobs, native, paths

ROOT = paths.ROOT
needs_make = pytest.mark.skipif(shutil.which("make") is None or paths.checkout() is None,
                                reason="needs make and a checkout")


def _make_commands(b: Path) -> dict[str, list[str]]:
    """{product: its compile command's words} as `make -n` prints them for build dir `b`."""
    targets = [b / "libhcmalloc.so"] + [b / n for n, r in native.RECIPES.items() if r.make]
    res = subprocess.run(["make", "-n", "-B", f"BUILD={b}", "CC=cc", *map(str, targets)],
                         cwd=ROOT, capture_output=True, text=True, check=True)
    out = {}
    for line in res.stdout.replace("\\\n", " ").splitlines():
        words = shlex.split(line.split("&&")[0])
        if words[:1] == ["cc"] and "-o" in words and "-c" not in words:
            out[Path(words[words.index("-o") + 1]).name.removesuffix(".tmp")] = words
    return out


def _split(words: list[str], b: Path) -> tuple[list[str], list[str], set[str]]:
    """(flags, libraries, inputs relative to the checkout) of one compile command."""
    out_at = words.index("-o") + 1
    flags = [w for i, w in enumerate(words[1:], 1)
             if w.startswith("-") and not w.startswith("-l") and w != "-o" and i != out_at]
    libs = [w for w in words if w.startswith("-l")]
    inputs = set()
    for i, w in enumerate(words[1:], 1):
        if w.startswith("-") or i == out_at:
            continue
        # make links the trace reader as build/libhctrace_read.a; hctune compiles its source
        inputs.add("tracer/hctrace_read.c" if w == str(b / "libhctrace_read.a") else w)
    return flags, libs, inputs


@needs_make
def test_the_makefile_builds_each_part_by_its_recipe(tmp_path):
    b = tmp_path / "b"
    cmds = _make_commands(b)
    hc = build.recipes()["hc"]
    flags, libs, _ = _split(cmds["libhcmalloc.so"], b)
    assert sorted(flags) == sorted(hc["cflags"] + hc["make_extra"]) and libs == []
    for name, r in native.RECIPES.items():
        if not r.make:
            assert name not in cmds
            continue
        flags, libs, inputs = _split(cmds[name], b)
        assert flags == [*native.CFLAGS, *r.flags], name
        assert libs == list(r.libs), name
        want = {p.relative_to(ROOT).as_posix() for g in r.sources for p in ROOT.glob(g)}
        assert inputs == want, name


def _text(lib: Path) -> bytes:
    out = lib.with_suffix(".text")
    subprocess.run(["objcopy", "-O", "binary", "--only-section=.text", str(lib), str(out)],
                   check=True)
    return out.read_bytes()


@pytest.mark.skipif(shutil.which("objcopy") is None, reason="needs binutils' objcopy")
def test_emit_so_holds_the_code_the_search_measured(tmp_path):
    setting = knobs.resolve("generic", ())
    hctune(tmp_path / "h.db", "emit", "--preset", "generic", "-o", tmp_path / "malloc.c",
           "--so", tmp_path / "libhc.so", cwd=tmp_path)
    measured = allocators.resolve("hc", setting).library       # what the search replays
    text = _text(tmp_path / "libhc.so")
    assert len(text) > 4096 and text == _text(measured)
    if shutil.which("make"):                                    # and the emitted malloc.mk's
        subprocess.run(["make", "-s", "-f", str(tmp_path / "malloc.mk"), "hcmalloc-so",
                        f"HCMALLOC_SO={tmp_path / 'libmade.so'}", "CC=cc"], cwd=tmp_path,
                       check=True, capture_output=True)
        assert _text(tmp_path / "libmade.so") == text
