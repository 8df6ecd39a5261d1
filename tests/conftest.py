"""Shared test fixtures and helpers: where the repo and its build live, compiling C for tests,
the hctune runner, same_output and stress, and the real traces the replay tests use.

`c_program("hc_stress")` compiles tests/c/hc_stress.c; `hc_library(setting, debug)` renders one
HC setting with hctune.render.render_malloc and compiles it into a shared library for
LD_PRELOAD. Both are cached under build/test-cache/ (HCTUNE_TEST_CACHE moves it) by a hash of
everything that goes into the build, written to a temp file and renamed, so reruns are fast and
concurrent runs are safe.

Compiles run on one session-wide pool of os.cpu_count() threads (each waits on its compiler
process), one build per distinct key per session: `prefetch_hc_libraries` starts a module's
later builds while its first tests run on the other core. HCTUNE_TEST_COMPILE_LOG=<file> gets
a line per compiler run (to count them).
"""

from __future__ import annotations

import concurrent.futures
import fcntl
import functools
import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from hctune import build, paths
from workloads import programs, run_program

ROOT = paths.ROOT
BUILD = paths.BUILD
TEST_CACHE = Path(os.environ.get("HCTUNE_TEST_CACHE") or BUILD / "test-cache")
CC = os.environ.get("CC", "cc")
# Release test builds: configs/build.toml's HC recipe (hctune.build) as it is, the code the search
# measures, without debug information (-g added ~25 % to each compile; nothing here reads it).
# Debug builds (HC_DEBUG: checked after every call, run only briefly): the recipe's debug flags
# at -Og instead of -O1 -g, which compiles in half the CPU and runs the checked stress as fast
# (bench/test_build_flags.py); the matrices build ~130 of them.
HC_SO_FLAGS = list(build.CFLAGS)
HC_DEBUG_SO_FLAGS = ["-Og", *(f for f in build.DEBUG_CFLAGS if f not in ("-O1", "-g"))]
PROGRAM_FLAGS = ["-O2", "-g", "-Wall", "-Wextra", "-std=gnu11", "-pthread"]


@functools.lru_cache(maxsize=None)
def _compiler_id() -> str:
    out = subprocess.run([CC, "--version"], capture_output=True, text=True)
    return out.stdout.splitlines()[0] if out.returncode == 0 and out.stdout else CC


def _compile_cached(kind: str, name: str, source: str, args: list[str], out_name: str,
                    also_hashed: str = "") -> Path:
    """Compile `source` (text) with `args`; cached at build/test-cache/<kind>/<hash>/<out_name>.
    `also_hashed`: what else the build depends on (headers it includes), hashed, not compiled."""
    return _submit(kind, name, source, args, out_name, also_hashed).result()


# One pool for the session's compiles (the threads only wait on the compiler processes; CI has
# two cores), and one future per distinct build: a key asked for twice, by two fixtures or two
# files, compiles once, the second asker waiting for the first.
_POOL = concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2,
                                              thread_name_prefix="compile")
_BUILDS: dict[Path, concurrent.futures.Future] = {}
_BUILDS_LOCK = threading.Lock()


def _submit(kind: str, name: str, source: str, args: list[str], out_name: str,
            also_hashed: str = "") -> concurrent.futures.Future:
    digest = hashlib.sha256("\0".join([_compiler_id(), source, also_hashed, *args]).encode()).hexdigest()[:20]
    out = TEST_CACHE / kind / f"{name}-{digest}" / out_name
    with _BUILDS_LOCK:
        future = _BUILDS.get(out)
        if future is None:
            if out.exists():
                future = concurrent.futures.Future()
                future.set_result(out)
            else:
                future = _POOL.submit(_compile, name, source, args, out)
            _BUILDS[out] = future
    return future


def _compile(name: str, source: str, args: list[str], out: Path) -> Path:
    if out.exists():    # built by another process meanwhile
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    # one compiler run per key across processes too (pytest-xdist's workers, two checkouts'
    # runs sharing HCTUNE_TEST_CACHE): the second waits on the lock and finds the build made
    with open(out.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if out.exists():
            return out
        return _compile_locked(name, source, args, out)


def _compile_locked(name: str, source: str, args: list[str], out: Path) -> Path:
    started = time.monotonic()
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        src = Path(tmp) / f"{name}.c"
        src.write_text(source)
        tmp_out = Path(tmp) / out.name
        cmd = [CC, *args, str(src), "-o", str(tmp_out), "-ldl"]
        res = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
        if res.returncode != 0:
            raise AssertionError(f"compile failed: {shlex.join(cmd)}\n{res.stderr[-4000:]}")
        os.replace(tmp_out, out)  # atomic: a concurrent build of the same key is harmless
    if log := os.environ.get("HCTUNE_TEST_COMPILE_LOG"):
        with open(log, "a") as f:
            f.write(f"{out.parent.name} {' '.join(args[:1])} {time.monotonic() - started:.2f}s\n")
    return out


def pytest_sessionfinish(session, exitstatus):
    """Builds started ahead for tests that did not run (-k, -x) are not waited for."""
    _POOL.shutdown(wait=True, cancel_futures=True)


def build_c_program(name: str, extra: tuple[str, ...] = ()) -> Path:
    """tests/c/<name>.c compiled (allocator-neutral: inject one with LD_PRELOAD)."""
    source = (ROOT / "tests" / "c" / f"{name}.c").read_text()
    include = ["-I", str(ROOT / "tests" / "c"), "-I", str(ROOT / "allocator" / "hc")]
    # Headers the program includes (tests/c/check.h, allocator/hc's) go into the hash too.
    headers = "".join(p.read_text() for d in ("tests/c", "allocator/hc")
                      for p in sorted((ROOT / d).glob("*.h")))
    return _compile_cached("bin", name, source, [*PROGRAM_FLAGS, *include, *extra], name,
                           also_hashed=headers)


def build_hc_library(setting: dict, debug: bool = False) -> Path:
    """One HC setting rendered to a single malloc.c and compiled as an LD_PRELOAD library."""
    return _submit_hc(setting, debug).result()


def _submit_hc(setting: dict, debug: bool) -> concurrent.futures.Future:
    try:
        from hctune.render import render_malloc
    except ImportError as e:  # the allocator is written in parallel with these tests
        pytest.skip(f"HC allocator not available yet (hctune.render: {e})")
    source = render_malloc(setting, debug=debug)
    flags = HC_DEBUG_SO_FLAGS if debug else HC_SO_FLAGS
    return _submit("hc", "debug" if debug else "hc", source, flags, "libhc.so")


def build_hc_libraries(settings: list[dict], debug: bool = False) -> list[Path]:
    """Several settings, compiled side by side on the session's pool (os.cpu_count() at a
    time); each distinct one once."""
    return [f.result() for f in prefetch_hc_libraries(settings, debug)]


def prefetch_hc_libraries(settings: list[dict], debug: bool = False) -> list[concurrent.futures.Future]:
    """Start building `settings` without waiting (build_hc_library(s) later waits for them):
    a module starts its later fixtures' builds while its first tests run."""
    return [_submit_hc(s, debug) for s in settings]


def generic_with(overrides: dict) -> dict:
    """HC's generic preset with `overrides`, every knob set."""
    from hctune import knobs
    return knobs.complete(dict(knobs.preset("generic"), **overrides))


def libraries_by_id(settings: list[tuple[str, dict]]):
    """Two module fixtures, release_libraries and debug_libraries, each {id: generic HC with
    that id's overrides, built} for `settings` [(id, overrides)]; a test module takes them as
    `release_libraries, debug_libraries = libraries_by_id(SETTINGS)`."""
    def built(debug: bool) -> dict:
        return dict(zip([i for i, _ in settings],
                        build_hc_libraries([generic_with(o) for _, o in settings], debug)))

    @pytest.fixture(scope="module")
    def release_libraries():
        # the debug builds compile behind the release ones, while the release tests run
        prefetch_hc_libraries([generic_with(o) for _, o in settings], True)
        return built(False)

    @pytest.fixture(scope="module")
    def debug_libraries():
        return built(True)
    return release_libraries, debug_libraries


def run_preloaded(argv, library: Path | None, timeout=180, **extra) -> subprocess.CompletedProcess:
    """`argv` (str() of each) on `library` (LD_PRELOAD; None: glibc), output as text; `extra`:
    more environment."""
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True,
                          timeout=timeout, env=preload_env(library, **extra))


def preload_env(library: Path | None, **extra: str) -> dict:
    """The environment for running a program on `library` (None: the system's glibc malloc)."""
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    env.pop("HCMALLOC_STATS", None)
    if library is not None:
        env["LD_PRELOAD"] = str(library)
    env.update(extra)
    return env


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def build_dir() -> Path:
    return BUILD


@pytest.fixture(scope="session")
def c_program():
    return build_c_program


@pytest.fixture(scope="session")
def hc_library():
    return build_hc_library


def _made(name: str) -> Path:
    lib = BUILD / name
    if not lib.exists():
        pytest.skip(f"{lib.relative_to(ROOT)} is not built; run `make` first")
    return lib


@pytest.fixture(scope="session")
def hcmalloc_so() -> Path:
    """build/libhcmalloc.so from `make` (the generic preset, Hasan & Chang 2006 Table 6)."""
    return _made("libhcmalloc.so")


@pytest.fixture(scope="session")
def hcmalloc_debug_so() -> Path:
    """build/libhcmalloc-debug.so from `make`: checks every heap invariant after each call."""
    return _made("libhcmalloc-debug.so")


# ---- helpers the test modules share (one home each; import them from conftest) ----

HCTUNE = [sys.executable, "-m", "hctune"]


def hctune(db, *args, check=True, timeout=600, **kw) -> subprocess.CompletedProcess:
    """`python -m hctune [--db DB] ARGS` in a subprocess, output as text (db None: no --db).
    check: a nonzero exit fails the test with the command's output. kw go to subprocess.run
    (cwd, env, input, preexec_fn)."""
    cmd = [*HCTUNE, *(["--db", str(db)] if db is not None else []), *map(str, args)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    if check and r.returncode != 0:
        raise AssertionError(f"hctune {' '.join(map(str, args))} -> {r.returncode}\n"
                             f"{r.stdout[-2000:]}\n{r.stderr[-3000:]}")
    return r


def header_text(source: str) -> str:
    """The opening comment of an emitted malloc.c with its wrapping undone (each line's " * "
    and indent dropped, the lines joined by one space): what the header says, whatever column
    a long path or command happened to wrap at (pytest-xdist's temporary paths are longer)."""
    head = source.split("*/", 1)[0]
    return " ".join(line.strip().lstrip("/*").strip() for line in head.splitlines()).strip()


def hctune_popen(db, *args, **kw) -> subprocess.Popen:
    return subprocess.Popen([*HCTUNE, "--db", str(db), *map(str, args)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def same_output(argv, library, input_bytes=None, timeout=300, text=False, env=None, **extra):
    """Run `argv` under glibc and under `library` (LD_PRELOAD): both exit 0 with identical
    stdout. `env` and `extra`: more environment for both runs."""
    def go(lib):
        return subprocess.run([str(a) for a in argv], capture_output=True, input=input_bytes,
                              text=text, timeout=timeout,
                              env=preload_env(lib, **(env or {}), **extra))
    ref = go(None)
    assert ref.returncode == 0, f"reference run failed: {ref.stderr[-2000:]!r}"
    got = go(library)
    assert got.returncode == 0, f"exit {got.returncode} under {library}: {got.stderr[-2000:]!r}"
    assert got.stdout == ref.stdout
    return got


def stress(program, library, ops, seed, slots, threads, timeout=180, **env):
    """tests/c/hc_stress.c under `library`: OPS random calls on SLOTS slots from THREADS
    threads, every live byte keeping its pattern; it must finish and report its counts."""
    res = subprocess.run([str(a) for a in (program, ops, seed, slots, threads)],
                         capture_output=True, text=True, timeout=timeout,
                         env=preload_env(library, **env))
    assert res.returncode == 0, f"exit {res.returncode}\n{res.stdout}{res.stderr[-3000:]}"
    assert re.fullmatch(rf"ok ops={ops} allocs=\d+ reallocs=\d+ frees=\d+\n", res.stdout)
    return res


@functools.lru_cache(maxsize=None)
def wordfreq():
    """tests/c/mt_wordfreq.cpp, compiled once per source."""
    src = ROOT / "tests" / "c" / "mt_wordfreq.cpp"
    if not shutil.which("g++"):
        pytest.skip("g++ is not installed (Debian package g++)")
    key = hashlib.sha256(src.read_bytes()).hexdigest()[:16]
    exe = TEST_CACHE / "bin" / f"mt_wordfreq-{key}"
    if not exe.exists():
        exe.parent.mkdir(parents=True, exist_ok=True)
        tmp = exe.with_suffix(f".tmp{os.getpid()}")     # (xdist: another worker may build it too)
        subprocess.run(["g++", "-O2", "-pthread", str(src), "-o", str(tmp)], check=True)
        tmp.rename(exe)
    return exe


@pytest.fixture(scope="session")
def replay_programs(tmp_path_factory):
    work = tmp_path_factory.mktemp("replay-programs")
    progs = programs(work)
    if len(progs) < 2:
        pytest.skip("needs two of gawk, sqlite3, python3 (installed by .ci/run)")
    return progs


@pytest.fixture(scope="session")
def replay_traces(replay_programs, tmp_path_factory):
    """name -> trace path, recorded once per session with the LD_PRELOAD tracer."""
    tracer = paths.BUILD / "libhctrace.so"
    if not tracer.exists():
        pytest.fail(f"{tracer} missing: run make")
    out = tmp_path_factory.mktemp("replay-traces")
    traces = {}
    for name, (argv, extra) in replay_programs.items():
        trace = out / f"{name}.hct"
        run_program(argv, extra, preload=tracer, HCTRACE_OUT=str(trace))
        assert trace.exists()
        traces[name] = trace
    return traces
