"""`hctune emit`: the single-file allocator compiles cleanly with gcc and clang, links into a
real C program that then runs correctly, its .so runs python3 under LD_PRELOAD, and the Make and
CMake snippets written beside it build a program."""

import os
import shutil
import subprocess
import sys

import pytest

from conftest import header_text
from hctune import paths
from search_support import hctune, need_hc, record_gawk_trace

pytestmark = pytest.mark.timeout(300)
APP = paths.ROOT / "tests" / "c" / "emit_wordcount.c"
STRICT = ["-O2", "-std=c11", "-Wall", "-Wextra", "-Werror"]


@pytest.fixture(scope="module")
def emitted(tmp_path_factory):
    need_hc()
    d = tmp_path_factory.mktemp("emit")
    r = hctune(d / "hctune.db", "emit", "--preset", "generic", "-o", d / "malloc.c",
               "--so", d / "libhcmalloc.so")
    assert "wrote" in r.stdout
    return d


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The test program's output with the C library's malloc."""
    exe = tmp_path_factory.mktemp("ref") / "wc"
    subprocess.run(["cc", *STRICT, str(APP), "-o", str(exe)], check=True)
    return subprocess.run([str(exe), "60000"], capture_output=True, text=True,
                          check=True).stdout


def hc_in_use(cmd, **kw):
    """Run `cmd` with HCMALLOC_STATS set: HC prints its statistics at exit, which proves that
    the program really allocated from HC."""
    env = dict(os.environ, HCMALLOC_STATS="1", **kw.pop("env", {}))
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120, **kw)


@pytest.mark.parametrize("cc", ["gcc", "clang"])
def test_compiles_without_a_warning_and_runs_a_real_program(emitted, reference, cc, tmp_path):
    if shutil.which(cc) is None:
        pytest.fail(f"{cc} is not installed (.ci/run installs it)")
    obj = tmp_path / "malloc.o"
    r = subprocess.run([cc, *STRICT, "-c", str(emitted / "malloc.c"), "-o", str(obj)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    exe = tmp_path / "wc"
    r = subprocess.run([cc, *STRICT, str(APP), str(obj), "-o", str(exe), "-lpthread"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    run = hc_in_use([str(exe), "60000"])
    assert run.returncode == 0, run.stderr
    assert run.stdout == reference
    assert run.stderr.strip(), "HC printed no statistics: the program did not use it"


def test_the_so_runs_python_under_ld_preload(emitted):
    code = ("import json, collections\n"
            "d = {str(i): [i] * (i % 7) for i in range(50000)}\n"
            "c = collections.Counter(len(v) for v in d.values())\n"
            "del d\n"
            "print(json.dumps(sorted(c.items())))")
    want = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout
    r = hc_in_use(["python3", "-c", code],
                  env={"LD_PRELOAD": str(emitted / "libhcmalloc.so")})
    assert r.returncode == 0, r.stderr
    assert r.stdout == want and r.stderr.strip()


def test_make_snippet_builds_the_program(emitted, reference, tmp_path):
    (tmp_path / "Makefile").write_text(
        f"HCMALLOC_OBJ := {tmp_path}/hcmalloc.o\n"
        f"include {emitted}/malloc.mk\n"
        f"wc: {APP} $(HCMALLOC_OBJ)\n"
        "\t$(CC) -O2 -o $@ $^ $(HCMALLOC_LIBS)\n")
    r = subprocess.run(["make", "-s", "-C", str(tmp_path), "wc"], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr
    run = hc_in_use([str(tmp_path / "wc"), "60000"])
    assert run.stdout == reference and run.stderr.strip()


def test_cmake_snippet_builds_the_program(emitted, reference, tmp_path):
    if shutil.which("cmake") is None:
        pytest.skip("cmake is not installed (the Debian package cmake; .ci/run installs it)")
    src = tmp_path / "src"
    src.mkdir()
    (src / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.13)\nproject(wc C)\n"
        f"include({emitted}/hcmalloc.cmake)\n"
        f"add_executable(wc {APP})\ntarget_link_libraries(wc PRIVATE hcmalloc)\n")
    b = tmp_path / "build"
    for cmd in (["cmake", "-S", str(src), "-B", str(b)], ["cmake", "--build", str(b)]):
        r = subprocess.run(cmd, capture_output=True, text=True)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    run = hc_in_use([str(b / "wc"), "60000"])
    assert run.stdout == reference and run.stderr.strip()


def test_emit_from_a_study_carries_its_provenance(tmp_path):
    need_hc()
    trace = record_gawk_trace(tmp_path / "gawk.trace")
    db = tmp_path / "hctune.db"
    hctune(db, "search", trace, "--objective", "perf", "--trials", 2, "--repeat", 1,
           "--allocators", "hc")
    out = tmp_path / "tuned" / "malloc.c"
    hctune(db, "emit", "-o", out, "--set", "QL_HIGH=264")
    text = out.read_text()
    assert str(trace) in header_text(text) and "study perf-time-" in text and "ns/op" in text
    assert "before --set QL_HIGH=264" in text
    assert "#define QL_HIGH 264" in text
    assert (out.parent / "malloc.mk").exists() and (out.parent / "hcmalloc.cmake").exists()
    r = subprocess.run(["cc", *STRICT, "-c", str(out), "-o", str(tmp_path / "m.o")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("args,message", [
    (["--set", "QL_HIGH=7"], "QL_HIGH=7 is outside its range"),
    (["--set", "NOPE=1"], "unknown knob 'NOPE'"),
    (["--preset", "fastest"], "unknown preset 'fastest'"),
    ([], "no study in the database"),
])
def test_bad_emit_input_writes_nothing(tmp_path, args, message):
    out = tmp_path / "malloc.c"
    r = hctune(tmp_path / "hctune.db", "emit", *(["--preset", "generic"] if args and
                                               args[0] == "--set" else []), *args, "-o", out,
               check=False)
    assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr
    assert not out.exists() and not (tmp_path / "malloc.mk").exists()
