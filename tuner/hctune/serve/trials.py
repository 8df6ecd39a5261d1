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
import hashlib
import json
import threading
import time
from collections import OrderedDict

import optuna
from optuna.trial import FrozenTrial

from hctune.search import study as _study
from hctune.search.storage import RETRY_OF

DEFAULT_TTL = 1.0   # seconds a read of a study's trials is served before it is refreshed
MAX_STUDIES = 32    # studies kept in memory (the least recently asked for goes first)


def trial_row(t: FrozenTrial) -> dict:
    a = t.user_attrs
    return {"number": t.number, "state": t.state.name.lower(),
            "mem_ratio": a.get("mem"), "perf_ratio": a.get("perf"),
            "feasible": _study.feasible(t) if "mem" in a else None,
            "allocator": a.get("allocator", "hc"),   # set by cross-allocator studies
            "setting": a.get("setting"), "seed": a.get("seed"),
            "worker": a.get("worker"), "error": a.get("error"),
            "retry_of": a.get(RETRY_OF)}   # the dead worker's trial this one runs again


def _encode(row: dict) -> bytes:
    return json.dumps(row, separators=(",", ":")).encode()


class Snapshot:
    """One read of a study's trials, never changed once made. It answers get_trials() like an
    optuna.Study, so hctune.search.study's summary() works on it without another read."""

    def __init__(self, name: str, state: str, trials: list[FrozenTrial], encoded: list[bytes]):
        self.study_name = name
        self.state = state
        self.trials = trials                 # in number order
        self._numbers = [t.number for t in trials]
        self._encoded = encoded
        self.blob = b"[" + b",".join(encoded) + b"]"
        self.etag = '"' + hashlib.blake2b(self.blob, digest_size=12).hexdigest() + '"'
        self._summaries: dict[str, dict] = {}
        self._lock = threading.Lock()

    def get_trials(self, deepcopy: bool = False, states=None) -> list[FrozenTrial]:
        if states is None:
            return list(self.trials)
        return [t for t in self.trials if t.state in states]

    def rows(self) -> list[dict]:
        return json.loads(self.blob)

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
                self._summaries[objective] = _study.summary(self, objective)
            return self._summaries[objective]


class _Entry:
    def __init__(self, study: optuna.Study):
        self.study = study
        self.snap: Snapshot | None = None
        self.taken = 0.0                     # time.monotonic() of snap's read
        self.lock = threading.Lock()         # held by the one request refreshing
        self.rows: dict[int, tuple[FrozenTrial, bytes]] = {}


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
        encoded = []
        for t in trials:
            old = e.rows.get(t.number)
            if old is None or old[0] is not t:   # Optuna's cache keeps a finished trial's object
                old = (t, _encode(trial_row(t)))
                e.rows[t.number] = old
            encoded.append(old[1])
        snap = Snapshot(name, state, trials, encoded)
        e.snap, e.taken = snap, started
        return snap

