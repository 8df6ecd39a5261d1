"""The knobs of glibc, jemalloc, mimalloc and tcmalloc (configs/allocators.toml): checked values,
one-line errors, the environment each library reads, and — with the Debian libraries
installed — that each declared knob, set to a non-default value, changes a measured figure of a
small trace built to show it, or is listed here as inert on this machine with the reason.

Figures are counts, not times: RSS bytes of a single-threaded replay (the same on every run)
and callgrind's instruction count of the replay loop."""

from __future__ import annotations

import random
import shutil
import subprocess
import sys

import pytest

from hctune import allocator_knobs as X
from hctune import allocators, replay
from hctune.errors import HctuneError
from hctune.trace.writer import Writer

# a value of each knob away from its default, and the trace that shows it ("churn" is one
# thread, "threads" four)
TEST_VALUES = {
    "glibc": {"mmap_threshold": 4096, "trim_threshold": 67108864, "top_pad": 16777216,
              "tcache_count": 0, "tcache_max": 0, "mxfast": 0, "hugetlb": 1},
    "jemalloc": {"dirty_decay_ms": 0, "muzzy_decay_ms": -1, "tcache": 0,
                 "tcache_max": 1048576, "retain": 0, "oversize_threshold": 65536,
                 "lg_extent_max_active_fit": 0, "narenas": 1, "background_thread": 1},
    "mimalloc": {"eager_commit": 0, "decommit_delay": 0, "allow_decommit": 0,
                 "page_reset": 1, "large_os_pages": 1, "eager_commit_delay": 0},
    "tcmalloc": {"max_total_thread_cache_bytes": 524288, "aggressive_decommit": 1,
                 "transfer_num_obj": 8},
}
# shown on the threaded trace (by instructions: several arenas, caches per thread)
THREADED = {("jemalloc", "narenas"), ("jemalloc", "background_thread"),
            ("mimalloc", "eager_commit_delay")}
# declared (a user may set them) but no figure of these small replays moves beyond noise
INERT = {
    ("glibc", "arena_max"): "its effect on the threaded replay (one arena instead of one per "
                            "thread) is within that replay's run-to-run spread (±8 % of "
                            "instructions: the threads' interleaving decides it)",
    ("jemalloc", "thp"): "THP is in madvise mode here; on a trace this small the change is "
                         "under 1 % of RSS and instructions",
    ("jemalloc", "metadata_thp"): "jemalloc's metadata on these traces is a few pages; huge "
                                  "pages for it move instructions by about 0.5 %, run to run "
                                  "(whether the kernel hands out a huge page decides it)",
    ("mimalloc", "segment_decommit_delay"): "acts on whole free segments, which the small "
                                            "replays only have when threads interleave",
    ("mimalloc", "decommit_extend_delay"): "only lengthens a pending decommit; the figures "
                                           "are sampled after the delay runs out either way",
    ("mimalloc", "abandoned_page_decommit"): "acts on pages of threads that exited; the "
                                             "replay's threads live to the end",
    ("mimalloc", "max_segment_reclaim"): "acts on segments of threads that exited; the "
                                         "replay's threads live to the end",
    ("tcmalloc", "release_rate"): "the incremental scavenger releases nothing within a replay "
                                  "this short at either rate (final RSS = peak at 1 and 10)",
}


def test_every_declared_knob_is_shown_or_said_inert():
    for a in X.names():
        for k in X.knobs(a):
            shown = k in TEST_VALUES.get(a, {})
            assert shown != ((a, k) in INERT), f"{a}.{k}: give a test value or say why inert"


def test_knob_declarations_are_complete():
    for a in X.names():
        info = X.allocator(a)
        assert info.package and info.doc
        for k in info.knobs.values():
            assert k.option and k.why and k.search
            k.check(k.default)  # the default is a legal value
            if k.type in ("int", "float"):
                assert k.min is not None and k.max is not None


def test_environment_strings():
    assert X.env_vars("glibc", {"arena_max": 2, "mxfast": 0}) == {
        "GLIBC_TUNABLES": "glibc.malloc.arena_max=2:glibc.malloc.mxfast=0"}
    assert X.env_vars("jemalloc", {"dirty_decay_ms": 0, "tcache": 0}) == {
        "MALLOC_CONF": "dirty_decay_ms:0,tcache:false"}
    assert X.env_vars("mimalloc", {"decommit_delay": 0}) == {"MIMALLOC_DECOMMIT_DELAY": "0"}
    assert X.env_vars("tcmalloc", {"release_rate": 5}) == {"TCMALLOC_RELEASE_RATE": "5"}
    # defaults are never written: the library keeps its own rule
    assert X.env_vars("jemalloc", {"narenas": 0, "dirty_decay_ms": 10000}) == {}
    assert X.key("jemalloc", X.from_key("jemalloc", "tcache=0,narenas=2")) == \
        "narenas=2,tcache=0"


def test_the_callers_own_variables_do_not_leak():
    env = allocators.Allocator("jemalloc", None, {}, ()).env({"MALLOC_CONF": "narenas:1"})
    assert "MALLOC_CONF" not in env


@pytest.mark.parametrize("sets, message", [
    (["jemalloc.narenas=x"], "jemalloc.narenas: 'x' is not an integer"),
    (["jemalloc.narena=1"], "unknown jemalloc knob 'narena'"),
    (["glibc.narenas=1"], "the allocator is jemalloc, not glibc"),
    (["narenas=-3"], "outside its range"),
    (["thp=sometimes"], "jemalloc.thp is one of default, always, never"),
    (["tcache=maybe"], "boolean knob"),
    (["narenas"], "--set wants jemalloc.KNOB=VALUE"),
])
def test_bad_settings_are_one_line(sets, message):
    with pytest.raises(HctuneError) as e:
        X.parse_sets("jemalloc", sets)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_bad_set_on_the_command_line_exits_2(tmp_path):
    res = subprocess.run([sys.executable, "-m", "hctune", "--db", str(tmp_path / "r.db"),
                          "replay", "--allocator", "jemalloc", "--set", "jemalloc.narenas=x",
                          str(tmp_path / "none.hct")], capture_output=True, text=True)
    assert res.returncode == 2
    assert res.stderr.strip().count("\n") == 0 and "narenas" in res.stderr, res.stderr


# ---- each knob moves a figure ----

def _churn(path):
    """One thread: small blocks, then medium, then big ones, each phase freed at the end."""
    rnd = random.Random(1)
    with Writer(path, command="churn") as w:
        p = 0x1000
        for phase, sizes in enumerate(((16, 24, 40, 64, 100, 200, 500, 1000),
                                       (3000, 9000, 40000), (200000, 700000, 2000000))):
            live = []
            for _ in range(2000 if phase < 2 else 60):
                p += 0x10
                w.malloc(p, rnd.choice(sizes))
                live.append(p)
                if rnd.random() < 0.3:
                    w.free(live.pop(rnd.randrange(len(live))))
            for q in live:
                w.free(q)
    return path


def _threads(path):
    """Four threads, each keeping a window of 1,500 small blocks."""
    rnd = random.Random(2)
    with Writer(path, command="threads") as w:
        p = 0x1000
        lives = {t: [] for t in range(4)}
        for i in range(8000):
            t = i % 4
            p += 0x10
            w.malloc(p, rnd.choice((32, 64, 128, 256, 1024, 4096)), thread=t)
            lives[t].append(p)
            if len(lives[t]) > 1500:
                w.free(lives[t].pop(0), thread=t)
        for t, live in lives.items():
            for q in live:
                w.free(q, thread=t)
    return path


# glibc asks for huge pages by madvise only when the kernel's THP mode is madvise (with always
# the kernel gives them anyway, with never not at all): elsewhere the knob changes nothing
NEEDS_THP_MADVISE = {("glibc", "hugetlb")}


def _thp_mode() -> str:
    try:
        text = open("/sys/kernel/mm/transparent_hugepage/enabled").read()
    except OSError:
        return "none"
    return text.split("[", 1)[-1].split("]", 1)[0] if "[" in text else "none"


FIGURES = ("peak_rss_bytes", "final_rss_bytes", "instructions")


def _figures(trace, alloc, setting):
    r = replay.measure(trace, alloc, setting, repeat=1, metric="instructions")
    return {f: r[f] for f in FIGURES}


def _moved(base, other, threaded) -> list[str]:
    out = []
    for f in FIGURES:
        b, o = base[f], other[f]
        if f == "instructions":
            limit = 0.02 if threaded else 0.005   # callgrind counts: exact on one thread
        else:
            limit = 0.10 if b > 1 << 20 else None  # RSS: a page here or there is not a change
        if limit is not None and abs(o - b) > limit * b:
            out.append(f"{f} {b:,} -> {o:,}")
    return out


@pytest.mark.parametrize("alloc", sorted(TEST_VALUES))
def test_each_knob_changes_a_measured_figure(alloc, tmp_path):
    if not shutil.which("valgrind"):
        pytest.skip("needs valgrind (callgrind's instruction counts)")
    try:
        allocators.resolve(alloc)
    except HctuneError as e:
        pytest.skip(str(e))
    churn, threads = _churn(tmp_path / "churn.hct"), _threads(tmp_path / "threads.hct")
    base = {churn: _figures(churn, alloc, {}), threads: None}
    unmoved = []
    for kname, value in TEST_VALUES[alloc].items():
        if (alloc, kname) in NEEDS_THP_MADVISE and _thp_mode() != "madvise":
            print(f"{alloc}.{kname}: THP mode {_thp_mode()!r}, not madvise: nothing to move")
            continue
        threaded = (alloc, kname) in THREADED
        trace = threads if threaded else churn
        if base[trace] is None:
            base[trace] = _figures(trace, alloc, {})
        moved = _moved(base[trace], _figures(trace, alloc, {kname: value}), threaded)
        print(f"{alloc}.{kname}={value} on {trace.name}: {'; '.join(moved) or 'nothing'}")
        if not moved:
            unmoved.append(kname)
    assert not unmoved, f"{alloc}: set but no figure moved: {unmoved}"


def test_real_runs_sample_the_rss_curve(c_program, tmp_path):
    """hcrun (validate's launcher) samples RSS while the program runs: after a 40 MiB peak
    jemalloc keeps its freed pages for dirty_decay_ms (10 s), with dirty_decay_ms:0 it does not;
    the peak (ru_maxrss) is the same either way."""
    from hctune.validate.launcher import hcrun
    try:
        allocators.resolve("jemalloc")
    except HctuneError as e:
        pytest.skip(str(e))
    prog = c_program("rss_curve")
    out = {}
    for label, setting in (("default", None), ("decay0", {"dirty_decay_ms": 0})):
        report = tmp_path / f"{label}.txt"
        subprocess.run([str(hcrun()), str(report), str(prog)], check=True,
                       env=allocators.resolve("jemalloc", setting).env())
        wall, _, _, maxrss, status, mean, final, samples = map(int, report.read_text().split())
        assert status == 0 and samples >= 10      # 300 ms of rest, a sample every 5 ms
        assert 0 < mean <= maxrss
        out[label] = (maxrss, final)
    mib = 1024
    assert out["default"][0] > 40 * mib and out["decay0"][0] > 40 * mib
    assert out["default"][1] > 40 * mib, out      # kept for the decay time
    assert out["decay0"][1] < 15 * mib, out       # purged at once


def test_declared_advice_seeds_are_valid_settings():
    for a in X.names():
        for label, setting in X.seeds(a, "mem") + X.seeds(a, "perf"):
            assert setting and X.complete(a, setting) == setting, label
    assert ("jemalloc no_decay" in X.seeds("jemalloc", "mem")[0][0])
