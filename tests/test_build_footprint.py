"""The footprint recipe (configs/build.toml's footprint_cflags, -Og): a study whose only measure
is HC's footprint builds its trials with it, because the footprint is a function of the calls
and the setting alone. Checked here on real traces: the cheap build's footprint and every
counter of the replay and of HC's statistics equal the -O2 build's, for settings that take
different paths through HC; and no other study (time, RSS, across allocators) nor validate,
emit or a download ever gets the cheap build."""

from __future__ import annotations

import concurrent.futures
import json
import shlex
from pathlib import Path

import pytest

from hctune import build, knobs, replay
from hctune.db import Database
from hctune.search import fitted, space, study
from hctune.search.options import Options

# What the process, not the allocator's decisions, sets: the CPU's time, the kernel's resident
# set, where the library lies. Everything else in the replay's JSON must be the same.
NOT_COUNTERS = {"times_ns", "cpu_times_ns", "cpu_median_ns", "median_ns", "time_ns_per_op",
                "cpu_ns_per_op", "time_ns_per_op_mean", "first_time_ns_per_op", "spread",
                "trace_seconds", "baseline_rss_bytes", "peak_rss_bytes",
                "peak_rss_all_repeats_bytes", "final_rss_bytes", "mean_rss_bytes",
                "rss_samples", "peak_rss_sample_op", "library", "footprint_build",
                "hc_stats"}
# HC's counts that the decay's clock drives (DECAY_MS > 0 gives pages back after so many ms):
# they move with the speed of the code, at any optimisation level, and so does the RSS
CLOCKED = {"small_bytes_released"}


def _settings(trace: Path) -> dict[str, dict]:
    tables, _ = fitted.derive([trace])
    assert tables, "the trace derives no fitted table"
    key, _values = tables[0]
    mon = {"MONITOR": 1}     # HC's statistics counted (the search's builds have it off)
    return {
        "generic as searched": space.for_search(knobs.preset("generic")),
        "generic, counted": knobs.complete({**knobs.preset("generic"), **mon}),
        "gawk-mem (Table 7)": knobs.complete({**knobs.preset("gawk-mem"), **mon}),
        "fitted table": fitted.apply(knobs.complete({**knobs.preset("generic"), **mon}), key,
                                     dict(tables)),
        "odd knobs, no decay": knobs.complete({
            **knobs.preset("generic"), **mon, "QL_HIGH": 16, "HEAP_UNIT": 4096,
            "MMAP_THRESHOLD": 4096, "COALESCE_RATIO": 3.5, "SPLIT": 0, "QL_PREALLOC": 0,
            "BIG_CACHE": 65536, "SMALL_MAX": 0, "DECAY_MS": 0}),
    }


@pytest.fixture(scope="module")
def traces(replay_traces):
    return list(replay_traces.values())[:2]


def test_the_footprint_build_measures_what_the_o2_build_does(traces):
    settings = _settings(traces[0])
    # both builds of every setting, two compiles at a time
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        libs = list(pool.map(lambda a: build.build_hc(a[0], footprint=a[1]),
                             [(s, f) for s in settings.values() for f in (False, True)]))
    assert len(set(libs)) == len(libs)          # each recipe its own cache entry
    # what the service's downloads and emit find in the cache is the -O2 build
    assert [build.cached_hc(s) for s in settings.values()] == libs[::2]
    for name, s in settings.items():
        for trace in traces:
            o2 = replay.measure(trace, "hc", s, repeat=1)
            o0 = replay.measure(trace, "hc", s, repeat=1, footprint=True)
            assert _flags(o2) == build.CFLAGS and _flags(o0) == build.FOOTPRINT_CFLAGS
            assert o0["footprint_build"] and "footprint_build" not in o2
            assert o0["footprint_bytes"] == o2["footprint_bytes"] > 0, (name, trace.name)
            assert o0["footprint_source"] == "hc_stats"
            same = {k: v for k, v in o2.items() if k not in NOT_COUNTERS}
            assert {k: o0.get(k) for k in same} == same, (name, trace.name)
            clocked = CLOCKED if s["DECAY_MS"] else set()
            st2 = {k: v for k, v in o2["hc_stats"].items() if k not in clocked}
            assert {k: o0["hc_stats"].get(k) for k in st2} == st2, (name, trace.name)
            if s["MONITOR"]:
                assert o2["hc_stats"]["allocs_total"] > 0      # the counters were counted


def _flags(result: dict) -> tuple[str, ...]:
    """The flags the measured library was compiled with: its cache entry's `cmd`."""
    words = shlex.split((Path(result["library"]).parent / "cmd").read_text())
    return tuple(w for w in words[1:words.index("-o")])


@pytest.mark.parametrize("opts, cheap", [
    (dict(objective="mem"), True),                                  # HC's footprint alone
    (dict(objective="mem", metric="instructions"), False),          # callgrind counts the code
    (dict(objective="mem", max_memory_overhead=10.0), False),       # a limit on peak RSS
    (dict(objective="mem", max_slowdown=20.0), False),              # a limit on time
    (dict(objective="mem", memory_measure="final"), False),         # an RSS figure
    (dict(objective="mem", memory_measure="mean"), False),
    (dict(objective="mem", allocators=("hc", "glibc")), False),     # peak RSS across allocators
    (dict(objective="perf"), False),
    (dict(objective="pareto"), False),
])
def test_only_a_study_of_the_footprint_alone_builds_cheap(opts, cheap):
    o = Options(**{"allocators": ("hc",), **opts})
    study.apply_defaults(o)
    assert o.footprint_build() is cheap


def _built_with(db_path) -> set[tuple[str, ...]]:
    with Database(db_path) as db:
        return {_flags(json.loads(m["result_json"])) for m in db.measurements()
                if m["allocator"] == "hc"}


def test_a_perf_study_builds_o2_and_a_footprint_study_cheap(traces, tmp_path):
    trace = traces[0]
    perf, mem = tmp_path / "perf.db", tmp_path / "mem.db"
    study.run(perf, [trace], Options(objective="perf", allocators=("hc",), trials=2, seed=1,
                                     repeat=1, fidelity="whole"))
    assert _built_with(perf) == {build.CFLAGS}
    r = study.run(mem, [trace], Options(objective="mem", allocators=("hc",), trials=2, seed=1,
                                        fidelity="whole"))
    assert _built_with(mem) == {build.FOOTPRINT_CFLAGS}
    with Database(mem) as db:
        _, st = study.load(db, r["study"])
    assert len(study.finished(st)) == 2
    with Database(mem) as db:
        # each says it came from a footprint build (report shows no time or RSS of it)
        assert all(json.loads(m["result_json"]).get("footprint_build")
                   for m in db.measurements() if m["allocator"] == "hc")
    # a perf study on the same database measures again, with -O2: nothing of the footprint
    # study's is reused where time matters
    study.run(mem, [trace], Options(objective="perf", allocators=("hc",), trials=1, seed=1,
                                    repeat=1, fidelity="whole", study="perf-after"))
    assert _built_with(mem) == {build.FOOTPRINT_CFLAGS, build.CFLAGS}
