"""From a setting to the numbers a study minimises.

Each setting is measured on every trace of the study by the replay harness (the trace-driven
method of Hasan & Chang 2006, §4.4) and compared with glibc on the same trace; with several
traces the objective is the geometric mean of those ratios, so no trace dominates by its size.
Measurements are cached in the results database by (trace, allocator, setting, metric): a setting
measured once is never built or replayed again, and glibc is measured once per trace.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import json
import math
import socket
import threading
from pathlib import Path

from hctune import allocators, build, replay
from hctune import knobs as _knobs
from hctune.db import Database
from hctune.errors import HctuneError

# The mem objective: HC's own high-water mark of memory taken from the OS (the paper's measure);
# for glibc the replay reports its peak RSS there. Limits compare like with like: peak RSS.
MEM_FIELD = "footprint_bytes"
RSS_FIELD = "peak_rss_bytes"
# --memory-measure: which memory figure the mem objective compares. "peak" keeps the field
# above in an HC-only study (HC's own footprint, the paper's measure); a study across
# allocators compares peak RSS, measured alike for every allocator. "final" is the RSS left
# once the replay has freed its blocks (where jemalloc's decay, glibc's trim and mimalloc's
# decommit delay show); "mean" the mean of the RSS curve the replay samples over its first
# repeat (hcreplay's mean_rss_bytes: the trace's op order as the clock), what a long-running
# program pays for on average rather than at its worst moment.
MEMORY_MEASURES = ("peak", "final", "mean")
# the replay's figure of each measure, and the real runs' (hcrun's RSS curve; validate)
MEMORY_FIELDS = {"final": "final_rss_bytes", "mean": "mean_rss_bytes"}
REAL_MEMORY_FIELDS = {"peak": "peak_rss_bytes", "final": "rss_final_bytes",
                      "mean": "rss_mean_bytes"}
PERF_FIELDS = {"time": "time_ns_per_op", "instructions": "instructions_per_op"}
OBJECTIVES = ("mem", "perf", "pareto")
# `perf` keeps peak RSS within this many percent of the larger of glibc's and generic HC's,
# unless the user sets a limit (then over glibc's) or lifts it (--max-memory-overhead none):
# a speed-up bought with much memory is the wrong default answer. The larger of the two, so a
# program on which HC's generic setting already needs more than glibc (ghostscript's replay:
# +15 %) is not pushed into the slow corners of the space that happen to fit under glibc.
DEFAULT_PERF_MEMORY_OVERHEAD = 10.0
METRICS = tuple(PERF_FIELDS)
# The replay harness's version, stored with every measurement and bumped when a stored figure
# of an older harness would mislead the search: 2, a threaded replay reads its RSS curve on its
# busiest thread (0663786; the main thread of a server only starts and joins its workers).
HARNESS = 2


@dataclasses.dataclass(frozen=True)
class Trace:
    id: int
    path: str
    sha256: str
    command: str | None = None

    @classmethod
    def from_row(cls, row) -> "Trace":
        return cls(id=row["id"], path=row["path"], sha256=row["sha256"], command=row["command"])


@dataclasses.dataclass
class Evaluation:
    """One setting on every trace: absolute numbers per trace and the ratios to glibc."""
    mem: float                 # geometric mean over traces of footprint / glibc footprint
    perf: float                # the same for time (or instructions) per operation
    worst_rss: float           # the largest per-trace peak-RSS ratio (what a memory limit checks)
    worst_perf: float          # the largest per-trace perf ratio (what a slowdown limit checks)
    per_trace: list[dict]
    cached: bool               # every measurement came from the database
    # the largest per-trace peak RSS over max(glibc's, generic HC's); None when the evaluator
    # has no generic reference (what the perf default limit checks)
    worst_rss_vs_ref: float | None = None

    def value(self, objective: str):
        return {"mem": self.mem, "perf": self.perf, "pareto": (self.mem, self.perf)}[objective]


def check_choice(objective: str, metric: str):
    if objective not in OBJECTIVES:
        raise HctuneError(f"unknown objective {objective!r}; use one of {', '.join(OBJECTIVES)}")
    if metric not in METRICS:
        raise HctuneError(f"unknown metric {metric!r}; use one of {', '.join(METRICS)}")


def geomean(values) -> float:
    values = list(values)
    return math.exp(sum(math.log(v) for v in values) / len(values))


# Memory ratios count at least one page on each side: a trace whose peak fits in less than a
# page (RSS over the baseline can then read 0) must not divide by zero or weigh infinitely.
PAGE = 4096


def _number(result: dict, field: str, what: str, floor: float = 0.0) -> float:
    v = result.get(field)
    if v is None or not isinstance(v, (int, float)) or math.isnan(v) or v < 0 \
            or (v == 0 and not floor):
        raise HctuneError(f"{what}: the replay reported no usable {field} ({v!r})")
    return max(float(v), floor)


def _accepted(fn, kwargs: dict) -> dict:
    """The keyword arguments of `kwargs` that `fn` takes (a stand-in measure_fn of the tests
    may take fewer than hctune.replay.measure)."""
    if not kwargs:
        return {}
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return {}
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return dict(kwargs)
    return {k: v for k, v in kwargs.items() if k in params}


class Evaluator:
    """Measures settings on a study's traces; safe to share between --jobs threads."""

    def __init__(self, db_path, traces: list[Trace], metric: str = "time", repeat: int = 3,
                 measure_fn=None, reference_setting: dict | None = None,
                 mem_field: str = MEM_FIELD, until_spread: float | None = None,
                 footprint_build: bool = False):
        self.db_path = str(db_path)
        # HC is built by the footprint recipe (hctune.build.FOOTPRINT_CFLAGS): a study whose
        # only measure is HC's footprint (search.options.Options.footprint_build decides it)
        self.footprint_build = footprint_build
        # time repeats: `repeat` is the most, the harness stops once two agree this closely
        self.until_spread = until_spread
        self.mem_field = mem_field
        self._measure_fn = measure_fn  # None: hctune.replay.measure (tests may pass their own)
        self.traces = traces
        self.metric = metric
        self.repeat = repeat
        # a stored time of fewer repeats than this is not reused (a mem study's one replay);
        # with until_spread the harness makes at least 3 (the first and two that agree)
        self.min_repeat = min(repeat, 3) if until_spread is not None else repeat
        self._local = threading.local()
        self._baselines: dict[tuple[int, str], dict] = {}
        self._lock = threading.Lock()
        self.reference_setting = reference_setting   # generic HC, for the perf default limit
        self._references: dict[int, dict] = {}
        self._measuring_lock = threading.Lock()
        self._parts: dict[tuple, dict] = {}
        self._measuring_locks: dict[tuple, threading.Lock] = {}

    def _db(self) -> Database:
        db = getattr(self._local, "db", None)
        if db is None:
            db = self._local.db = Database(self.db_path)
        return db

    def close(self):
        db = getattr(self._local, "db", None)
        if db is not None:
            db.close()
            self._local.db = None

    # ---- measurements, cached in the database ----

    def build_key(self, setting: dict) -> str:
        """The build cache's key of HC with `setting` (rendered source + compiler + flags)."""
        return self.build_keys(setting)[0]

    def build_keys(self, setting: dict) -> tuple[str, ...]:
        """The keys of the HC builds whose measurements this evaluator takes: its own recipe's
        first; a footprint study also takes the -O2 build's (the same footprint), never the
        other way round (a footprint build's time and RSS are not the library's)."""
        from hctune import render  # deferred: the renderer loads Jinja2 (validate imports this module)
        source, cc = render.render_malloc(_knobs.complete(setting)), build.compiler()
        if not self.footprint_build:
            return (build.cache_key(source, cc, build.CFLAGS),)
        return (build.cache_key(source, cc, build.FOOTPRINT_CFLAGS),
                build.cache_key(source, cc, build.CFLAGS))

    def _how(self) -> dict:
        """What every replay of this evaluator is asked besides its bounds (a stand-in
        measure_fn of the tests builds nothing: not asked)."""
        return {"footprint": True} if self.footprint_build and self._measure_fn is None else {}

    @staticmethod
    def _current(r: dict) -> bool:
        """A stored result the harness of today would give: a threaded replay's memory figures
        from a harness older than HARNESS are not (its RSS curve was read on the main thread)."""
        return r.get("threads", 1) <= 1 or r.get("harness", 1) >= HARNESS

    def stored(self, trace: Trace, allocator: str, setting: dict | None):
        key = allocators.setting_key(allocator, setting)
        # this machine's own: a shared database holds other machines' times too
        rows = self._db().measurements(trace_id=trace.id, allocator=allocator, setting=key,
                                       metric=self.metric, host=socket.gethostname())
        if key is None:
            rows = [r for r in rows if r["setting"] is None]
        # a multi-threaded trace measured on one thread (before the threaded replay, or with
        # --threads off) is not what the search measures
        results = [r for r in (json.loads(row["result_json"]) for row in rows)
                   if (r.get("threads", 1) <= 1 or r.get("threads_mode") == "auto")
                   # a measurement from before the replay recorded this memory figure (the
                   # RSS curve's mean): measured again
                   and r.get(self.mem_field, 0) is not None and self.mem_field in r
                   and self._current(r)
                   # a time of fewer repeats than asked (a mem study's one replay) is not
                   # reused where the time matters
                   and r.get("repeat", self.repeat) >= self.min_repeat
                   and not r.get("ops_limit")]
        if allocators.of(allocator).compiled and setting is not None and self._measure_fn is None \
                and results:
            # Only a measurement of the same build counts: a changed allocator source or
            # compiler (a new hctune) makes old numbers stale, not reusable.
            keys = self.build_keys(setting)
            results = [r for r in results if Path(r.get("library") or "").parent.name in keys]
        return results[-1] if results else None

    def measure(self, trace: Trace, allocator: str = "hc", setting: dict | None = None,
                **bounds):
        """(result, cached): a stored measurement, or a new one (built, replayed, stored). Two
        threads (--jobs) asking for the same one at once measure it once: the second waits.
        `bounds` (should_stop, max_rss_bytes, ...) go to hctune.replay.measure; a replay they
        end raises (ReplayStopped, ReplayPruned) and stores nothing."""
        key = allocators.setting_key(allocator, setting)
        with self._measuring(trace.id, allocator, key):
            found = self.stored(trace, allocator, setting)
            if found is not None:
                return found, True
            fn = self._measure_fn
            if fn is None:
                fn = replay.measure
            bounds = dict(bounds, **self._how())
            if self.until_spread is not None:
                bounds = dict(bounds, until_spread=self.until_spread)
            result = dict(fn(trace.path, allocator=allocator, setting=setting,
                             repeat=self.repeat, metric=self.metric,
                             **_accepted(fn, bounds)), harness=HARNESS)
            self._db().add_measurement(trace.id, allocator, key, self.metric, self.repeat,
                                       result)
            return result, False

    def measure_part(self, trace: Trace, allocator: str, setting: dict | None, ops: int,
                     **bounds) -> dict:
        """A measurement of the trace's first `ops` ops (a part: multi-fidelity trials), kept
        in memory for this run and never stored (a stored measurement is of the whole)."""
        key = ("part", trace.id, allocator, allocators.setting_key(allocator, setting), ops)
        with self._measuring(*key):
            found = self._parts.get(key)
            if found is None:
                fn = self._measure_fn or replay.measure
                found = dict(fn(trace.path, allocator=allocator, setting=setting,
                                repeat=self.repeat, metric=self.metric,
                                **_accepted(fn, dict(bounds, ops=ops, **self._how()))),
                             harness=HARNESS)
                self._parts[key] = found
            return found

    @contextlib.contextmanager
    def _measuring(self, *what):
        with self._measuring_lock:
            lock = self._measuring_locks.setdefault(what, threading.Lock())
        with lock:
            yield

    def baseline(self, trace: Trace, allocator: str = "glibc") -> dict:
        """The allocator's measurement on `trace`, measured once and then reused (from memory
        within a run, from the database across runs)."""
        with self._lock:
            cached = self._baselines.get((trace.id, allocator))
            if cached is None:
                cached, _ = self.measure(trace, allocator)
                self._baselines[(trace.id, allocator)] = cached
            return cached

    def reference(self, trace: Trace) -> dict | None:
        """The reference HC setting's measurement on `trace` (measured once, then reused)."""
        if self.reference_setting is None:
            return None
        with self._lock:
            found = self._references.get(trace.id)
            if found is None:
                found, _ = self.measure(trace, "hc", self.reference_setting)
                self._references[trace.id] = found
            return found

    # ---- the objective ----

    def evaluate(self, setting: dict, allocator: str = "hc", should_stop=None,
                 bounds=None, parts: dict | None = None) -> Evaluation:
        """`setting` of `allocator` (HC's, or another's knobs) on every trace, against glibc.
        should_stop: asked while replaying; True ends the replay (hctune.replay.ReplayStopped).
        bounds(trace) -> {max_rss_bytes, max_cpu_seconds}: a replay past them has lost already
        and ends early (hctune.replay.ReplayPruned). parts {trace id: ops}: on the traces'
        first ops only, against glibc's on the same part (search/fidelity.py)."""
        field = PERF_FIELDS[self.metric]
        mem_field = self.mem_field
        who = allocators.of(allocator).tag
        rows, all_cached = [], True
        for t in self.traces:
            base = self.baseline(t)
            extra = dict(bounds(t) if bounds else {})
            if should_stop:
                extra["should_stop"] = should_stop
            if parts:
                base = self.measure_part(t, "glibc", None, parts[t.id])
                hc, cached = self.measure_part(t, allocator, setting, parts[t.id], **extra), False
            else:
                hc, cached = self.measure(t, allocator, setting, **extra)
            all_cached &= cached
            mem = _number(hc, mem_field, who, PAGE) / _number(base, mem_field, "glibc", PAGE)
            perf = _number(hc, field, who) / _number(base, field, "glibc")
            rss = _number(hc, RSS_FIELD, who, PAGE) / _number(base, RSS_FIELD, "glibc", PAGE)
            ref = self.reference(t)
            rss_ref = None if ref is None else _number(hc, RSS_FIELD, who, PAGE) / max(
                _number(base, RSS_FIELD, "glibc", PAGE), _number(ref, RSS_FIELD, "generic", PAGE))
            rows.append({"trace_id": t.id, "footprint_bytes": hc[mem_field], field: hc[field],
                         RSS_FIELD: hc[RSS_FIELD], "glibc_footprint_bytes": base[mem_field],
                         f"glibc_{field}": base[field], f"glibc_{RSS_FIELD}": base[RSS_FIELD],
                         "mem_ratio": mem, "perf_ratio": perf, "rss_ratio": rss,
                         **({"rss_ratio_vs_ref": rss_ref} if rss_ref is not None else {})})
        return Evaluation(mem=geomean(r["mem_ratio"] for r in rows),
                          perf=geomean(r["perf_ratio"] for r in rows),
                          worst_rss=max(r["rss_ratio"] for r in rows),
                          worst_perf=max(r["perf_ratio"] for r in rows),
                          per_trace=rows, cached=all_cached,
                          worst_rss_vs_ref=max((r["rss_ratio_vs_ref"] for r in rows
                                                if "rss_ratio_vs_ref" in r), default=None))


def constraints(ev: Evaluation, max_memory_overhead: float | None,
                max_slowdown: float | None, memory_vs_reference: bool = False) -> list[float]:
    """Optuna constraint values (feasible when <= 0): the limits in percent over glibc, checked on
    the worst trace (memory as peak RSS, measured alike for every allocator); with
    `memory_vs_reference` (the perf default) the memory limit is over the larger of glibc's and
    generic HC's peak RSS. Empty when no limit is set."""
    out = []
    if max_memory_overhead is not None:
        worst = ev.worst_rss_vs_ref if memory_vs_reference and ev.worst_rss_vs_ref is not None \
            else ev.worst_rss
        out.append(worst - (1 + max_memory_overhead / 100))
    if max_slowdown is not None:
        out.append(ev.worst_perf - (1 + max_slowdown / 100))
    return out
