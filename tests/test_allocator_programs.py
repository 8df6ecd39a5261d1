"""Real programs under LD_PRELOAD=build/libhcmalloc.so give the same output as under glibc.

Python running some of its own regression tests (with PYTHONMALLOC=malloc, so every object goes
through the allocator under test), gcc compiling a C file, sqlite3 running a script, gawk
counting words in generated text, sort with worker threads, and groff and ghostscript (two of the
paper's own test programs); the debug build under one smaller program; HCMALLOC_STATS.
"""

import random
import re
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, preload_env, same_output
from workloads import GAWK_PROGRAM, sqlite_script, words_file

PY_TESTS = ["test_list", "test_dict", "test_set", "test_json"]


def run(argv, library, timeout=300, text=True, **kw):
    env = preload_env(library, **kw.pop("env", {}))
    return subprocess.run([str(a) for a in argv], capture_output=True, text=text,
                          timeout=timeout, env=env, **kw)


def python_with_regression_tests():
    """A python3 that ships its regression tests (Debian's needs libpython3.X-testsuite)."""
    for cand in [sys.executable, shutil.which("python3"), "/usr/bin/python3"]:
        if cand and subprocess.run([cand, "-c", "import test.test_list, test.test_json"],
                                   capture_output=True).returncode == 0:
            return cand
    return None


def test_python_regression_tests(hcmalloc_so, tmp_path):
    python = python_with_regression_tests()
    if python is None:
        pytest.skip("no python3 here has its `test` package (Debian: libpython3-testsuite)")
    argv = [python, "-m", "test", "-q", *PY_TESTS]
    # The reference run keeps Python's own small-object pool (it only counts the tests).
    ref = run(argv, None, env={"PYTHONHASHSEED": "0"}, cwd=tmp_path)
    got = run(argv, hcmalloc_so, env={"PYTHONMALLOC": "malloc", "PYTHONHASHSEED": "0"},
              cwd=tmp_path)
    assert ref.returncode == 0, ref.stdout[-2000:]
    assert got.returncode == 0, f"under HC: {got.stdout[-2000:]}{got.stderr[-2000:]}"
    # The summary names the same number of tests run and skipped (durations differ).
    counts = [re.search(r"Total tests: .*", r.stdout) for r in (ref, got)]
    assert counts[0] and counts[1] and counts[0].group() == counts[1].group()
    assert "SUCCESS" in got.stdout


def test_gcc_compiles_same_assembly(hcmalloc_so):
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc not installed")
    # cc1 inherits LD_PRELOAD: the compiler proper runs on HC.
    source = ROOT / "tests" / "c" / "hc_threads.c"
    same_output([gcc, "-O2", "-S", "-o", "-", source], hcmalloc_so)





def test_sqlite3_script(hcmalloc_so, tmp_path):
    sqlite3 = shutil.which("sqlite3")
    if sqlite3 is None:
        pytest.skip("sqlite3 not installed")
    script = tmp_path / "script.sql"
    script.write_text(sqlite_script())
    same_output([sqlite3, ":memory:", f".read {script}"], hcmalloc_so)








def test_gawk_word_counts(hcmalloc_so, tmp_path):
    gawk = shutil.which("gawk")
    if gawk is None:
        pytest.skip("gawk not installed")
    data = words_file(tmp_path / "words.txt", 60_000)
    same_output([gawk, GAWK_PROGRAM, data], hcmalloc_so)


def test_debug_library_under_gawk(hcmalloc_debug_so, tmp_path):
    """Every call checks the whole heap: a small input, but a real program's call mix."""
    gawk = shutil.which("gawk")
    if gawk is None:
        pytest.skip("gawk not installed")
    data = words_file(tmp_path / "words.txt", 400)
    same_output([gawk, GAWK_PROGRAM, data], hcmalloc_debug_so, timeout=200)


def test_stats_printed_at_exit(hcmalloc_so, tmp_path):
    """HCMALLOC_STATS=1 prints HC's statistics to stderr at exit; =PATH writes them there."""
    gawk = shutil.which("gawk") or "awk"
    data = words_file(tmp_path / "words.txt", 2000)
    res = run([gawk, GAWK_PROGRAM, data], hcmalloc_so, env={"HCMALLOC_STATS": "1"})
    assert res.returncode == 0
    assert re.search(r"footprint", res.stderr), res.stderr
    out = tmp_path / "stats.txt"
    res = run([gawk, GAWK_PROGRAM, data], hcmalloc_so, env={"HCMALLOC_STATS": str(out)})
    assert res.returncode == 0
    assert "footprint" not in res.stderr
    assert re.search(r"footprint", out.read_text())


def test_sort_with_threads(hcmalloc_so, tmp_path):
    """A multi-threaded real program: sort --parallel starts worker threads (pthreads)."""
    sort = shutil.which("sort")
    rng = random.Random(5)
    data = tmp_path / "lines.txt"
    data.write_text("".join("".join(rng.choice("abcdefghij") for _ in range(rng.randint(1, 30)))
                            + "\n" for _ in range(300_000)))
    same_output([sort, "--parallel=4", "-S", "100M", data], hcmalloc_so)


def troff_document() -> str:
    """A man-page-like document: sections, paragraphs, tagged lists, font changes."""
    rng = random.Random(1977)
    words = ["allocator", "quick", "list", "wilderness", "coalescing", "block", "heap", "free",
             "split", "bitmap", "medium", "big", "size", "header", "trailer", "mmap"]
    out = [".TH HCTEST 1", ".SH NAME", "hctest \\- a generated page"]
    for s in range(40):
        out.append(f".SH SECTION {s}")
        for _ in range(6):
            out.append(" ".join(rng.choice(words) for _ in range(rng.randint(20, 80))))
            out.append(".PP")
        for t in range(4):
            out += [".TP", f"\\fB{rng.choice(words)}{t}\\fR \\fIarg\\fP",
                    " ".join(rng.choice(words) for _ in range(30))]
    return "\n".join(out) + "\n"


def test_groff_and_ghostscript(hcmalloc_so, tmp_path):
    """Two of the paper's own test programs (Hasan & Chang 2006, §4): groff typesets a page to
    PostScript, ghostscript rasterises it; both outputs byte for byte as under glibc."""
    groff, gs = shutil.which("groff"), shutil.which("gs")
    if groff is None or gs is None:
        pytest.skip("groff or ghostscript not installed")
    page = tmp_path / "page.1"
    page.write_text(troff_document())
    env = {"SOURCE_DATE_EPOCH": "0"}  # no creation date in the PostScript
    ps = same_output([groff, "-man", "-Tps", page], hcmalloc_so, env=env).stdout
    (tmp_path / "page.ps").write_bytes(ps)
    same_output([gs, "-q", "-dNOPAUSE", "-dBATCH", "-dSAFER", "-sDEVICE=pgmraw", "-r50",
                 "-sOutputFile=-", tmp_path / "page.ps"], hcmalloc_so, env=env)
