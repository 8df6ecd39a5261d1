"""The trials of the studies `hctune serve` shows, kept in memory (one cache per server process).

Many clients poll a live study (its page asks every second); reading 1,000 trials with their
attributes through Optuna for each of them would keep the server busy doing nothing else. So:

- one `optuna.Study` per study is kept for the life of the process: Optuna's cache in front of
  its RDB storage then reads only what changed since the last read (trials that were not
  finished, and new ones; a finished trial never changes);
- a read older than `ttl` seconds is refreshed by the one request that finds it so, while the
  requests arriving meanwhile get the last read (stale while revalidate): readers never queue
  behind a refresh;
- each trial's JSON is encoded once and reused while the trial is unchanged, and the list's
  bytes, their ETag and the study's summary are made once per read;
- a change of the study's state (hc_queue, read by every request) is never served stale: the
  first request that sees the new state waits for a fresh read, so a study shown `done` shows
  all its trials.
"""

from __future__ import annotations

import bisect
import copy
import hashlib
import json
import math
import threading
import time
from collections import OrderedDict

import optuna
from optuna.trial import FrozenTrial

from hctune import allocators
from hctune import knobs as _knobs
from hctune.errors import HctuneError
from hctune.search import space as _space
from hctune.search import study as _study
from hctune.search.storage import RETRY_OF

DEFAULT_TTL = 1.0   # seconds a read of a study's trials is served before it is refreshed
MAX_STUDIES = 32    # studies kept in memory (the least recently asked for goes first)
MAX_PAGE = 200      # the most trials one page of the table holds
MAX_OFFSET = 10**9  # more trials than a study holds
SORT_KEYS = ("number", "state", "allocator", "mem_ratio", "perf_ratio", "seed", "worker",
             "duration_s")
STATES = ("complete", "running", "waiting", "fail", "pruned")


def finite_number(x) -> float | None:
    """A ratio as the pages can show it: a finite number, or None (a stored NaN, infinity, a
    string or a list would make the JSON invalid for a browser, or break the plot)."""
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
        return None
    return float(x)


def _text(x, limit: int = 4096) -> str | None:
    """A stored attribute as text of bounded length (None stays None)."""
    if x is None:
        return None
    s = x if isinstance(x, str) else json.dumps(x, default=str)
    return s if len(s) <= limit else s[:limit] + "…"


_GENERIC: dict = {}


def changed_from_generic(alloc, setting) -> str | None:
    """What a trial's setting changes from HC's generic setting (Hasan & Chang 2006, Table 6),
    as KNOB=VALUE,...; another allocator's setting is its changed knobs already. The whole
    setting is on the trial's page."""
    if not isinstance(setting, str):
        return _text(setting)

    def generic() -> dict:
        if not _GENERIC:   # generic as the search measures it (as `hctune best` compares)
            _GENERIC.update(_space.for_search(_knobs.preset("generic")))
        return _GENERIC
    try:
        return _text(allocators.of(alloc).short_key(setting, generic))
    except (HctuneError, ValueError, TypeError):
        return _text(setting)


def duration(t: FrozenTrial) -> float | None:
    """Seconds from the trial's start to its end (None while it runs)."""
    if t.datetime_start is None or t.datetime_complete is None:
        return None
    return round((t.datetime_complete - t.datetime_start).total_seconds(), 3)


def trial_row(t: FrozenTrial) -> dict:
    a = t.user_attrs
    try:
        feasible = _study.feasible(t) if "mem" in a else None
    except TypeError:         # constraints stored as something other than numbers
        feasible = False
    retry = a.get(RETRY_OF)
    return {"number": t.number, "state": t.state.name.lower(),
            "allocator": _text(_study.trial_allocator(t), 64),
            "mem_ratio": finite_number(a.get("mem")),
            "perf_ratio": finite_number(a.get("perf")),
            "feasible": feasible,
            "setting": _text(a.get("setting")), "seed": _text(a.get("seed"), 256),
            "changed": changed_from_generic(_study.trial_allocator(t), a.get("setting")),
            "duration_s": duration(t),
            "worker": _text(a.get("worker"), 256), "error": _text(a.get("error")),
            # the dead worker's trial this one runs again
            "retry_of": retry if isinstance(retry, int) and not isinstance(retry, bool) else None}


def _measured_ok(t: FrozenTrial) -> bool:
    a = t.user_attrs
    if "mem" not in a:
        return True
    c = a.get("constraints", [])
    return (finite_number(a.get("mem")) is not None
            and finite_number(a.get("perf")) is not None
            and isinstance(c, list) and all(finite_number(x) is not None for x in c))


def _unmeasured(t: FrozenTrial) -> FrozenTrial:
    u = copy.copy(t)
    u.user_attrs = {k: v for k, v in t.user_attrs.items()
                    if k not in ("mem", "perf", "constraints")}
    return u


def _encode(row: dict) -> bytes:
    return json.dumps(row, separators=(",", ":")).encode()


def _finite(x):
    """x with every non-finite float in it made None: what json.dumps writes as NaN/Infinity is
    not JSON to a browser."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_finite(v) for v in x]
    return x


class Snapshot:
    """One read of a study's trials, never changed once made. It answers get_trials() like an
    optuna.Study, so hctune.search.study's summary() works on it without another read."""

    def __init__(self, name: str, state: str, trials: list[FrozenTrial], encoded: list[bytes],
                 rows: list[dict] | None = None):
        self.study_name = name
        self.state = state
        self.trials = trials                 # in number order
        self._numbers = [t.number for t in trials]
        self._encoded = encoded
        self._rows = rows if rows is not None else [json.loads(b) for b in encoded]
        self._front: list[int] | None = None
        self._clean: list[FrozenTrial] | None = None
        self._pages: dict[tuple, tuple[bytes, str]] = {}
        self.blob = b"[" + b",".join(encoded) + b"]"
        self.etag = '"' + hashlib.blake2b(self.blob, digest_size=12).hexdigest() + '"'
        self._summaries: dict[str, dict] = {}
        self._lock = threading.RLock()   # (summary and front read get_trials under it)

    def get_trials(self, deepcopy: bool = False, states=None) -> list[FrozenTrial]:
        """The trials as the summary and the front read them: a finished trial whose stored
        ratios are not finite numbers (or whose constraints are not numbers) reads as one
        that was never measured, so it is in no best, on no front, and breaks neither."""
        with self._lock:
            if self._clean is None:
                self._clean = [t if _measured_ok(t) else _unmeasured(t) for t in self.trials]
        if states is None:
            return list(self._clean)
        return [t for t in self._clean if t.state in states]

    def rows(self) -> list[dict]:
        return json.loads(self.blob)

    def front(self) -> list[int]:
        """The numbers of the trials on the Pareto front of (footprint, speed), both against
        glibc: feasible finished trials that no other is at least as good as on both and
        better on one (hctune.search.study.pareto_front), by footprint."""
        with self._lock:
            if self._front is None:
                self._front = [t.number for t in _study.pareto_front(self)]
            return self._front

    def table(self, state: str | None = None, allocator: str | None = None, text: str = "",
              front_only: bool = False, sort: str = "number", desc: bool = True,
              offset: int = 0, limit: int = 50) -> tuple[bytes, str]:
        """One page of the trial table as (JSON, ETag): the trials in `state`, measured with
        `allocator`, whose setting or seed holds `text` (any case), on the front only if asked,
        sorted by `sort` (empty cells last either way), `limit` of them from `offset`. With
        them: how many match, how many there are, the front, the allocators and states seen."""
        key = (state, allocator, text, front_only, sort, desc, offset, limit)
        with self._lock:
            hit = self._pages.get(key)
        if hit is not None:
            return hit
        front = self.front()
        on_front = set(front)
        needle = text.casefold()
        rows = [r for r in self._rows
                if (state is None or r["state"] == state)
                and (allocator is None or r["allocator"] == allocator)
                and (not front_only or r["number"] in on_front)
                and (not needle or needle in (r["setting"] or "").casefold()
                     or needle in (r["seed"] or "").casefold())]
        present = [r for r in rows if r[sort] is not None]
        present.sort(key=lambda r: (r[sort], r["number"]), reverse=desc)
        rows = present + [r for r in rows if r[sort] is None]
        page = [dict(r, front=r["number"] in on_front) for r in rows[offset:offset + limit]]
        out = {"total": len(self._rows), "matched": len(rows), "offset": offset,
               "limit": limit, "front": front,
               "allocators": sorted({r["allocator"] for r in self._rows if r["allocator"]}),
               "states": sorted({r["state"] for r in self._rows}), "trials": page}
        body = json.dumps(out, separators=(",", ":")).encode()
        etag = '"' + hashlib.blake2b(self.etag.encode() + repr(key).encode(),
                                     digest_size=12).hexdigest() + '"'
        with self._lock:
            if len(self._pages) >= 32:
                self._pages.clear()
            self._pages[key] = (body, etag)
        return body, etag

    def since(self, number: int) -> tuple[bytes, str]:
        """(JSON, ETag) of the trials numbered `number` or more (all of them for 0)."""
        if number <= 0:
            return self.blob, self.etag
        start = bisect.bisect_left(self._numbers, number)
        return (b"[" + b",".join(self._encoded[start:]) + b"]",
                f'"{self.etag[1:-1]}.{number}"')

    def summary(self, objective: str) -> dict:
        with self._lock:   # made once per read, whoever asks first
            if objective not in self._summaries:
                self._summaries[objective] = _finite(_study.summary(self, objective))
            return self._summaries[objective]


class _Entry:
    def __init__(self, study: optuna.Study):
        self.study = study
        self.snap: Snapshot | None = None
        self.taken = 0.0                     # time.monotonic() of snap's read
        self.lock = threading.Lock()         # held by the one request refreshing
        self.rows: dict[int, tuple[FrozenTrial, bytes, dict]] = {}


class TrialsCache:
    """Snapshots of the studies' trials; `storage` is called for the Optuna storage to read."""

    def __init__(self, storage, ttl: float = DEFAULT_TTL, max_studies: int = MAX_STUDIES):
        self._storage = storage
        self.ttl = ttl
        self.max_studies = max_studies
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._lock = threading.Lock()

    def _entry(self, name: str) -> _Entry | None:
        with self._lock:
            e = self._entries.get(name)
            if e is not None:
                self._entries.move_to_end(name)
                return e
        try:
            study = optuna.load_study(study_name=name, storage=self._storage())
        except KeyError:
            return None   # queued, its worker has not created it yet
        with self._lock:
            e = self._entries.setdefault(name, _Entry(study))
            while len(self._entries) > self.max_studies:
                self._entries.popitem(last=False)
            return e

    def last_state(self, name: str) -> str | None:
        """The state the study's last read was made in (None: not read yet)."""
        e = self._entries.get(name)
        return None if e is None or e.snap is None else e.snap.state

    def forget(self, name: str) -> None:
        """Drop the study (deleted): a new one of the same name is read afresh."""
        with self._lock:
            self._entries.pop(name, None)

    def peek(self, name: str, state: str) -> Snapshot | None:
        """What get() would answer without reading anything (the last read while it is fresh,
        or while another request refreshes it); None when get() has to read."""
        e = self._entries.get(name)   # (a dict read needs no lock)
        snap = None if e is None else e.snap
        if snap is None or snap.state != state:
            return None
        if time.monotonic() - e.taken < self.ttl or e.lock.locked():
            return snap
        return None

    def get(self, name: str, state: str) -> Snapshot | None:
        """The study's trials as read at most `ttl` seconds ago (or being refreshed right now by
        another request), and read after the study entered `state`; None when Optuna does not
        know the study yet."""
        e = self._entry(name)
        if e is None:
            return None
        snap = e.snap
        if snap is not None and snap.state == state:
            if time.monotonic() - e.taken < self.ttl:
                return snap
            if not e.lock.acquire(blocking=False):
                return snap      # another request is refreshing it: serve the last read
        else:
            e.lock.acquire()     # no read yet, or the state changed: wait for a fresh one
            if e.snap is not None and e.snap is not snap and e.snap.state == state:
                e.lock.release()     # made by another request while we waited
                return e.snap
        try:
            return self._refresh(e, name, state)
        finally:
            e.lock.release()

    def _refresh(self, e: _Entry, name: str, state: str) -> Snapshot:
        started = time.monotonic()
        trials = e.study.get_trials(deepcopy=False)   # reads only what changed (Optuna's cache)
        encoded, rows = [], []
        for t in trials:
            old = e.rows.get(t.number)
            if old is None or old[0] is not t:   # Optuna's cache keeps a finished trial's object
                row = trial_row(t)
                old = (t, _encode(row), row)
                e.rows[t.number] = old
            encoded.append(old[1])
            rows.append(old[2])
        snap = Snapshot(name, state, trials, encoded, rows)
        e.snap, e.taken = snap, started
        return snap

