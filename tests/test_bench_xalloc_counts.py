"""bench/xalloc_counts.py's attribution of callgrind costs to the allocator (issue 18: the
allocator's share of a program's instructions, which chose the long perf programs), on a
hand-written callgrind file, and its one-line errors."""

import importlib.util
import os
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT

# callgrind's format with name compression: main in the program calls malloc (libc) and
# memset; malloc calls _int_malloc (inside the allocator) and memset (outside it, its work)
OUT = """\
version: 1
creator: hand
events: Ir
ob=(1) /usr/bin/prog
fl=(1) ???
fn=(1) main
0 100
cob=(2) /usr/lib/x86_64-linux-gnu/libc.so.6
cfn=(2) malloc
calls=1 0
0 60
cob=(2)
cfn=(3) __memset_avx2_unaligned_erms
calls=1 0
0 7
ob=(2)
fn=(2)
0 10
cfn=(4) _int_malloc
calls=1 0
0 30
cfn=(3)
calls=1 0
0 20
fn=(4)
0 30
fn=(3)
+1 27
fn=(5) freelocale
* 4
ob=(3) ???
fn=(6) free
0 9
"""


@pytest.fixture(scope="module")
def xc():
    spec = importlib.util.spec_from_file_location("xalloc_counts",
                                                  ROOT / "bench" / "xalloc_counts.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["xalloc_counts"] = module
    spec.loader.exec_module(module)
    return module


def test_glibc_share_counts_its_malloc_functions_and_their_calls_out(xc, tmp_path):
    f = tmp_path / "cg.out"
    f.write_text(OUT)
    total, alloc = xc.split_costs(f, xc.classifier("glibc", None))
    # every self cost once: 100 + 10 + 30 + 27 + 4 + 9
    assert total == 180
    # malloc 10 + _int_malloc 30 + malloc's memset call 20 (not _int_malloc's call again)
    assert alloc == 60


def test_a_preloaded_library_owns_its_object_and_unnamed_api_functions(xc, tmp_path):
    f = tmp_path / "cg.out"
    f.write_text(OUT.replace("/usr/lib/x86_64-linux-gnu/libc.so.6", str(tmp_path / "lib.so")))
    (tmp_path / "lib.so").write_text("")
    total, alloc = xc.split_costs(f, xc.classifier("x", tmp_path / "lib.so"))
    # the whole object (10 + 30 + 27 + 4) and free in "???" (9); memset is in the object here
    assert (total, alloc) == (180, 80)


def test_unknown_program_is_one_line_exit_2():
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "xalloc_counts.py"), "--share",
                        "nosuch"], capture_output=True, text=True)
    assert r.returncode == 2
    assert "unknown program nosuch" in r.stderr
    assert "Traceback" not in r.stderr


def test_counts_without_a_headline_run_is_one_line_exit_2(tmp_path):
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "xalloc_counts.py"), "--out",
                        str(tmp_path), "gawk"], capture_output=True, text=True)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "xalloc_counts: no " in r.stderr


@pytest.mark.skipif(not shutil.which("valgrind"), reason="valgrind not installed")
def test_share_of_a_real_run_is_within_the_whole(xc, tmp_path):
    total, alloc = xc.instructions(["/bin/true"], dict(os.environ), "glibc", None, tmp_path)
    assert total > 0 and 0 <= alloc < total
