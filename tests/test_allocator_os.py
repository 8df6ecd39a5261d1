"""HC and the operating system (issue 9): mapped blocks of any alignment, heap growth, the
self-adjusting mmap threshold, memory given back (decay, malloc_trim), glibc's malloc API."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, preload_env
from hctune import knobs, paths
from hctune.render import render_malloc


@pytest.fixture(params=["hc", "hc-debug"])
def hc_build(request):
    return request.getfixturevalue("hcmalloc_so" if request.param == "hc" else "hcmalloc_debug_so")


def test_alignments_up_to_2_pow_35(c_program, hc_build):
    """memalign/posix_memalign/aligned_alloc from 32 B to 32 GiB alignment: aligned, writable,
    and free() unmaps exactly the block's mapping (an offset of 4 GiB or more used to be cut to
    32 bits and free() unmapped the wrong range)."""
    res = subprocess.run([str(c_program("hc_align_big")), "35"], capture_output=True, text=True,
                         timeout=60, env=preload_env(hc_build))
    assert res.returncode == 0 and res.stdout.startswith("ok "), res.stdout + res.stderr


def run_os(program, mode, library, *extra):
    res = subprocess.run([str(program), mode, *extra], capture_output=True, text=True,
                         timeout=60, env=preload_env(library))
    assert res.returncode == 0, res.stdout + res.stderr
    return dict((line.split()[0], line.split()[1:]) for line in res.stdout.splitlines())


def test_decay_gives_memory_back_within_2_s(c_program, hcmalloc_so):
    """512 MiB in small, medium and large blocks, all freed: with the decay on (generic:
    DECAY_MS=500) the resident size falls below 32 MiB within 2 s.  HC has no background
    thread: the program makes one 8 KiB malloc/free every 10 ms while it waits (a call reaching
    the slow path, where the decay reads its clock), and reads /proc/self/statm."""
    out = run_os(c_program("hc_os"), "decay", hcmalloc_so)
    assert int(out["rss_peak_kib"][0]) > 400 * 1024, out
    assert "released_ms" in out, f"RSS never fell below 32 MiB: {out}"
    assert float(out["released_ms"][0]) <= 2000, out


def test_decay_off_keeps_the_paper_behaviour(c_program, hc_library):
    """DECAY_MS=0 is the paper's allocator: nothing is given back."""
    lib = hc_library(knobs.resolve("generic", ["DECAY_MS=0"]))
    out = run_os(c_program("hc_os"), "decay", lib)
    assert "timeout" in out and int(out["timeout"][1]) > 256 * 1024, out


@pytest.mark.parametrize("lazy", [1, 0], ids=["lazy", "mprotect"])
def test_malloc_trim_releases_at_once(c_program, hc_library, lazy):
    """The same 512 MiB freed, then malloc_trim(0): below 32 MiB right after the call; with the
    heap committed on first touch (HEAP_LAZY=1) and with the mprotect commit (HEAP_LAZY=0)."""
    lib = hc_library(knobs.resolve("generic", [f"HEAP_LAZY={lazy}"]))
    out = run_os(c_program("hc_os"), "trim", lib, "info")
    assert out["trim"][0] == "1" and int(out["trim"][2]) < 32 * 1024, out


def test_static_link_with_glibc_api(tmp_path):
    """`cc -static app.c malloc.c` of a program calling mallinfo2, mallopt, malloc_trim,
    malloc_stats and malloc_info links (no libc.a malloc.o pulled in) and gets HC's numbers."""
    cc = shutil.which("cc") or shutil.which("gcc")
    probe = subprocess.run([cc, "-static", "-x", "c", "-", "-o", str(tmp_path / "probe")],
                           input="int main(void){return 0;}", capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip("no static libc (libc6-dev's libc.a) to link against")
    (tmp_path / "malloc.c").write_text(render_malloc(knobs.preset("generic")))
    out = tmp_path / "app"
    res = subprocess.run([cc, "-O2", "-static", "-I", str(paths.ALLOCATOR / "hc"),
                          "-I", str(paths.ROOT / "tests" / "c"),
                          str(paths.ROOT / "tests" / "c" / "hc_glibc_api.c"),
                          str(tmp_path / "malloc.c"), "-o", str(out)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-3000:]
    run = subprocess.run([str(out)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and run.stdout.startswith("ok "), run.stdout + run.stderr
    assert "Arena 0:" in run.stderr and "system bytes" in run.stderr, run.stderr


def test_glibc_api_under_preload(c_program, hcmalloc_so):
    """Under LD_PRELOAD the same calls reach HC, not glibc's empty arena."""
    res = subprocess.run([str(c_program("hc_glibc_api"))], capture_output=True, text=True,
                         timeout=60, env=preload_env(hcmalloc_so))
    assert res.returncode == 0 and res.stdout.startswith("ok "), res.stdout + res.stderr


# Strings, bytes objects and dicts of 8 B to 1 MiB built and dropped by plain python3 (pymalloc
# on: only blocks over 512 bytes reach malloc); a few survive each round.
def _python_churn() -> str:
    """bench/alloc_workloads.py's python-pymalloc script, at half its rounds."""
    spec = importlib.util.spec_from_file_location("alloc_workloads",
                                                  ROOT / "bench" / "alloc_workloads.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module.python_churn(rounds=150)


OS_CALLS = ("mmap", "munmap", "mprotect", "madvise")


def syscall_counts(argv, library, tmp_path):
    """strace -c -f's call counts by system call name."""
    out = tmp_path / "strace.txt"
    env = preload_env(library, PYTHONHASHSEED="0")  # dict and set layouts the same every run
    # Address randomization off: python3's own 1 MiB arenas (mmapped by pymalloc, not by the
    # allocator under test) came to 151..219 mappings from run to run under HC without it.
    fixed = ["setarch", "-R"] if shutil.which("setarch") else []
    res = subprocess.run([*fixed, "strace", "-f", "-c", "-o", str(out), "-e",
                          "trace=" + ",".join(OS_CALLS + ("brk",)), *argv],
                         capture_output=True, text=True, timeout=120, env=env)
    assert res.returncode == 0, res.stderr[-2000:]
    counts = {}
    for line in out.read_text().splitlines():
        f = line.split()
        if f and f[-1] in OS_CALLS + ("brk",) and f[3].isdigit():
            counts[f[-1]] = int(f[3])
    return counts


@pytest.mark.skipif(not shutil.which("strace"), reason="needs strace (installed by .ci/run)")
def test_python_makes_no_more_os_calls_than_glibc(hcmalloc_so, tmp_path):
    """mmap + munmap + mprotect + madvise of a python3 workload under HC generic: no more than
    glibc's, within 20 % (issue 9; the paper's fixed threshold made ~27,000 mmaps of it).
    glibc's brk calls (its heap growth and trimming) are not in the sum: HC makes none."""
    python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
    script = tmp_path / "churn.py"
    script.write_text(_python_churn())
    glibc = syscall_counts([python, str(script)], None, tmp_path)
    hc = syscall_counts([python, str(script)], hcmalloc_so, tmp_path)
    total = {name: sum(c.get(k, 0) for k in OS_CALLS) for name, c in (("glibc", glibc), ("hc", hc))}
    print(f"glibc {glibc} -> {total['glibc']}; hc {hc} -> {total['hc']}")
    assert total["hc"] <= 1.2 * total["glibc"], (glibc, hc)




def peak_rss_kib(argv, library, **extra) -> int:
    """The peak resident size (ru_maxrss, KiB) of one run: a count the kernel keeps, not a time."""
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env=preload_env(library, PYTHONHASHSEED="0", **extra))
    _, status, usage = os.wait4(proc.pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, proc.stderr.read()[-2000:]
    proc.stderr.close()
    return usage.ru_maxrss


def test_python_rss_below_glibc_with_calloc_mappings_kept(hcmalloc_so, tmp_path):
    """Issue 17: python3's bytes(n) are callocs never written past their ends.  CALLOC_MMAP gives
    those above the threshold their own mapping, so the zeros never become resident, and
    CALLOC_CACHE keeps freed ones for later callocs (zeroing only the pages written), so a
    handful of mappings serve thousands of callocs.  Peak RSS is no more than glibc's (measured
    7 % below), and the statistics say the mappings were reused, not made anew each time (the
    OS calls are counted by test_python_makes_no_more_os_calls_than_glibc)."""
    python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
    script = tmp_path / "churn.py"
    script.write_text(_python_churn())
    glibc = peak_rss_kib([python, str(script)], None)
    stats = tmp_path / "stats.txt"
    hc = peak_rss_kib([python, str(script)], hcmalloc_so, HCMALLOC_STATS=str(stats))
    counters = dict(line.split()[:2] for line in stats.read_text().splitlines()[1:] if " " in line)
    reused, mapped = int(counters["calloc_maps_reused"]), int(counters["mmaps"])
    print(f"peak RSS glibc {glibc} KiB, hc {hc} KiB; calloc mappings reused {reused}, mmaps {mapped}")
    assert hc <= glibc, (hc, glibc)
    assert reused >= 1000 and mapped * 10 <= reused, counters
@pytest.mark.parametrize("debug", [True, False], ids=["debug", "release"])
def test_stress_with_constant_purging(c_program, hc_library, debug):
    """The randomized stress (tests/c/hc_stress.c: every live byte keeps its pattern) with the
    decay purging at every period of 1 ms from 4 KiB of free memory: released pages, marks and
    the decay's complete coalescings never touch a live block, and in the debug build every
    heap invariant holds after each call."""
    lib = hc_library(knobs.resolve("generic", ["DECAY_MS=1", "DECAY_BYTES=4096"]), debug=debug)
    ops, slots = (30_000, 400) if debug else (1_000_000, 2000)
    res = subprocess.run([str(c_program("hc_stress")), str(ops), "11", str(slots)],
                         capture_output=True, text=True, timeout=120, env=preload_env(lib))
    assert res.returncode == 0 and res.stdout.startswith(f"ok ops={ops} "), \
        res.stdout + res.stderr[-3000:]


@pytest.mark.parametrize("sets,bounded", [([], True), (["SMALL_EMPTY=0"], False)])
def test_empty_small_pages_beyond_the_bound_are_released(c_program, hc_library, sets, bounded):
    """SMALL_EMPTY: 14 emptied 64 KiB pages (less than DECAY_BYTES, so the decay alone keeps them
    for good: gawk's 0.6 MiB over glibc) -- with the bound, all but 4 go back once they have
    been empty for DECAY_MS / 8: counted from HC's statistics (8 pages' blocks released, each
    keeping its header's OS page, in every run measured; none without the bound), and seen in the resident pages (measured 119-170 with
    the bound, 239-290 without; only the bound's side is asserted, with room for that spread).
    The program sleeps past that time, so a slow machine cannot change the outcome."""
    import re
    lib = hc_library(knobs.resolve("generic", sets))
    out = subprocess.run([str(c_program("sp_empty"))], capture_output=True, text=True,
                         timeout=60, env=preload_env(lib))
    assert out.returncode == 0, out.stderr[-2000:]
    m = re.fullmatch(r"resident (-?\d+) released (\d+)\n", out.stdout)
    assert m, out.stdout
    resident, released = int(m.group(1)), int(m.group(2))
    if bounded:
        assert released >= 8 * (65536 - os.sysconf("SC_PAGESIZE")), out.stdout
        assert resident <= 230, out.stdout
    else:
        assert released == 0, out.stdout


def test_heap_reserves_address_space_as_it_grows(c_program, hc_library, tmp_path):
    """The paper's heap reserves 64 MiB of address space at first (it took 64 GiB when first
    used) and grows in place: one block leaves the process under 512 MiB of VmSize, and 300 MiB
    of 40 KiB blocks (past the first 64 MiB, several growths) all come from the heap, with
    their contents kept."""
    lib = hc_library(knobs.resolve("paper-generic", []))
    stats = tmp_path / "stats.txt"
    res = subprocess.run([str(c_program("hc_os")), "reserve", "300"], capture_output=True,
                         text=True, timeout=60, env=preload_env(lib, HCMALLOC_STATS=str(stats)))
    assert res.returncode == 0, res.stdout + res.stderr[-2000:]
    first, after = (int(line.split()[1]) for line in res.stdout.splitlines())
    assert first < 512 * 1024, first
    assert after < first + 512 * 1024, (first, after)
    counters = dict(line.split()[:2] for line in stats.read_text().splitlines()[1:] if " " in line)
    assert int(counters["heap_bytes"]) >= 300 << 20, counters
    assert int(counters["mmaps"]) == 0, counters


@pytest.mark.parametrize("level", [0, 1, 2])
def test_hugepage_marks_the_mappings_of_its_level(c_program, hc_library, level):
    """HUGEPAGE: the small pages' region and the heap carry the "hg" flag (madvise
    MADV_HUGEPAGE) in /proc/self/smaps from level 1, a mapped block only at 2, nothing at 0 (the
    request is recorded whatever the kernel's THP setting)."""
    lib = hc_library(knobs.resolve("generic", [f"HUGEPAGE={level}"]))
    got = run_os(c_program("hc_huge"), "", lib)
    on, mapped = str(int(level >= 1)), str(int(level >= 2))
    assert got == {"small": [on], "heap": [on], "mapped": [mapped]}
