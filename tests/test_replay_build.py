"""The HC build cache (hctune.build): one compile per key, reuse, safe concurrent builds, the
builds table; and the allocator names (hctune.allocators)."""

from __future__ import annotations

import concurrent.futures
import subprocess

import pytest

from hctune import allocators, build, knobs, paths
from hctune.db import Database
from hctune.errors import HctuneError


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A private cache directory, so these tests really compile."""
    d = tmp_path / "cache"
    monkeypatch.setattr(paths, "CACHE", d)
    return d


def test_build_once_then_reuse(cache, tmp_path):
    setting = knobs.preset("gawk-perf")
    with Database(tmp_path / "h.db") as db:
        lib = build.build_hc(setting, db=db)
        assert lib.is_file() and lib.parent.parent == cache and lib.name == "libhc.so"
        mtime = lib.stat().st_mtime_ns
        again = build.build_hc(dict(setting), db=db)
        assert again == lib and lib.stat().st_mtime_ns == mtime  # not rebuilt
        row = db.build(lib.parent.name)
        assert row["setting"] == knobs.key(setting) and row["library"] == str(lib)
        assert "-O2" in row["cflags"] and row["compiler"]
    # the library really exports HC's statistics
    nm = subprocess.run(["nm", "-D", str(lib)], capture_output=True, text=True).stdout
    assert " T hc_stats_get" in nm and " T malloc" in nm
    # no temporary directories left behind
    assert [p.name for p in cache.iterdir()] == [lib.parent.name]


def test_key_follows_setting_and_flags(cache):
    a = build.build_hc(knobs.preset("generic"))
    b = build.build_hc(knobs.resolve("generic", ["QL_HIGH=128"]))
    d = build.build_hc(knobs.preset("generic"), debug=True)
    assert len({a.parent, b.parent, d.parent}) == 3


def test_concurrent_builds_of_one_key(cache):
    setting = knobs.resolve("generic", ["HEAP_UNIT=16384"])
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        libs = list(pool.map(lambda _: build.build_hc(setting), range(4)))
    assert len(set(libs)) == 1 and libs[0].is_file()
    assert len(list(cache.iterdir())) == 1


def test_damaged_cache_entry_is_rebuilt(cache):
    lib = build.build_hc(knobs.preset("generic"))
    lib.unlink()
    assert build.build_hc(knobs.preset("generic")) == lib and lib.is_file()


def test_allocator_names():
    assert allocators.resolve("glibc").library is None
    for name in ("jemalloc", "mimalloc", "tcmalloc", "kingsley"):
        assert allocators.resolve(name).library.is_file()
    hc = allocators.resolve("hc")
    assert hc.setting == knobs.preset("generic") and hc.library.is_file()
    path = allocators.resolve(str(paths.BUILD / "libkingsley.so"))
    assert path.library == (paths.BUILD / "libkingsley.so").resolve()
    assert allocators.parse_list(" glibc, jemalloc,,glibc ") == ["glibc", "jemalloc"]


@pytest.mark.parametrize("name, message", [
    ("dlmalloc", "unknown allocator 'dlmalloc'"),
    ("/nonexistent/libfoo.so", "does not exist"),
    ("", "empty allocator name"),
])
def test_bad_allocator_names(name, message):
    with pytest.raises(HctuneError, match=message):
        allocators.resolve(name)


def test_missing_system_library_names_the_package(monkeypatch):
    monkeypatch.setattr(allocators, "_LIB_DIRS", ())
    monkeypatch.setattr(allocators, "_ldconfig", lambda: {})
    with pytest.raises(HctuneError, match="install the Debian package libtcmalloc-minimal4"):
        allocators.resolve("tcmalloc")


def test_setting_only_for_hc():
    with pytest.raises(HctuneError, match="only applies to the hc allocator"):
        allocators.resolve("glibc", knobs.preset("generic"))
