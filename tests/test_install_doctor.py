"""hctune doctor, --version, the native parts' cache, and comparisons without jemalloc."""

from __future__ import annotations

import json

import pytest

from conftest import hctune as run_hctune
from hctune import allocators, compare, doctor, native
from hctune.errors import HctuneError


def hctune(*args, env=None):
    return run_hctune(None, *args, check=False, timeout=120, env=env)


def test_doctor_json_lists_every_dependency():
    r = hctune("doctor", "--json")
    assert r.returncode in (0, 1), r.stderr
    report = json.loads(r.stdout)
    names = {d["name"]: d for d in report["dependencies"]}
    for want in ("C compiler", "valgrind", "jemalloc", "mimalloc", "tcmalloc",
                 "PostgreSQL client", "PostgreSQL server", "strace", "chromium",
                 "Pin kit (PIN_ROOT)"):
        assert want in names, want
        assert isinstance(names[want]["present"], bool)
        assert names[want]["install"]
    assert names["jemalloc"]["install"] == "sudo apt-get install libjemalloc2"
    assert {n["name"] for n in report["native"]} == set(native.NAMES)
    assert all(isinstance(n["built"], bool) for n in report["native"])


def test_doctor_says_what_is_missing(tmp_path, monkeypatch):
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    monkeypatch.delenv("PIN_ROOT", raising=False)
    r = hctune("doctor")
    assert r.returncode == 1          # the C compiler is required
    assert "MISSING C compiler" in r.stdout and "sudo apt-get install build-essential" in r.stdout
    assert "PIN_ROOT is not set" in r.stdout


def test_version_is_the_package_metadata():
    import importlib.metadata
    r = hctune("--version")
    assert r.returncode == 0
    assert r.stdout.startswith(f"hctune {importlib.metadata.version('hctune')}")
    assert "(commit " in r.stdout      # run from the git checkout


def test_native_part_without_compiler_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    monkeypatch.setenv("HCTUNE_BUILD", str(tmp_path / "empty"))
    monkeypatch.setenv("HCTUNE_CACHE", str(tmp_path / "cache"))
    with pytest.raises(HctuneError) as e:
        native.path("libkingsley.so")
    msg = str(e.value)
    assert "\n" not in msg and "no-such-cc" in msg and "build-essential" in msg


def test_native_part_missing_header_named(tmp_path, monkeypatch):
    monkeypatch.setenv("HCTUNE_BUILD", str(tmp_path / "empty"))
    monkeypatch.setenv("HCTUNE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setitem(native.RECIPES, "libhcbump.so", native.Recipe(
        ("allocator/replay/bump.c",), (), ("-include", "no_such_header.h", "-shared"), (),
        "the bump allocator"))
    with pytest.raises(HctuneError, match="no_such_header.h"):
        native.path("libhcbump.so")


def test_native_parts_build_once_in_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HCTUNE_BUILD", str(tmp_path / "empty"))
    monkeypatch.setenv("HCTUNE_CACHE", str(tmp_path / "cache"))
    import concurrent.futures
    with concurrent.futures.ThreadPoolExecutor(2) as pool:   # two builds of one key race
        a, b = pool.map(lambda _: native.path("libhcbump.so"), range(2))
    assert a == b and a.exists() and str(a).startswith(str(tmp_path / "cache" / "native"))
    assert native.status()["libhcbump.so"] == str(a)
    leftovers = [p for p in (tmp_path / "cache" / "native").iterdir() if p.name.startswith(".")]
    assert leftovers == []


def test_compare_leaves_out_a_missing_allocator(monkeypatch):
    real = allocators.find_system

    def no_jemalloc(name):
        if name == "jemalloc":
            raise HctuneError("jemalloc is not installed; install the Debian package libjemalloc2")
        return real(name)

    monkeypatch.setattr(allocators, "find_system", no_jemalloc)
    skipped = []
    got = compare.entries(["glibc", "jemalloc"], [], optional=tuple(allocators.SYSTEM),
                          skipped=skipped)
    assert [e["label"] for e in got] == ["glibc"]
    assert skipped and "jemalloc left out" in skipped[0] and "libjemalloc2" in skipped[0]
    with pytest.raises(HctuneError):     # named explicitly: an error, not a silent gap
        compare.entries(["glibc", "jemalloc"], [])


def test_doctor_reads_the_one_package_list():
    pk = doctor.packages()
    assert pk["build-essential"][0] is True and pk["libjemalloc2"][0] is False


def test_emitted_provenance_carries_version_and_commit(tmp_path):
    import importlib.metadata

    from hctune import emit
    _, prov = emit.choose_setting(tmp_path / "h.db", None, None, "generic", ())
    assert prov["hctune"].startswith(importlib.metadata.version("hctune") + " (commit ")


def test_first_use_compile_says_one_line(tmp_path, monkeypatch, capfd):
    """Compiling a native part on first use (an installed wheel) is not a silent pause: one
    line on stderr; the second use says nothing."""
    monkeypatch.setenv("HCTUNE_BUILD", str(tmp_path / "empty"))
    monkeypatch.setenv("HCTUNE_CACHE", str(tmp_path / "cache"))
    native.path("libhcbump.so")
    err = capfd.readouterr().err
    assert err.count("\n") == 1 and err.startswith("hctune: compiling ") \
        and "(libhcbump.so) on first use" in err, err
    native.path("libhcbump.so")
    assert capfd.readouterr().err == ""
