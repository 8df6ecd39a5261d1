"""`hctune worker`, the job runner beside its queue (hctune.jobs): take studies from the
queue (hc_queue) and run their trials through
hctune.search.study.run, the same code `hctune search` runs. Several workers may run one study:
each calls run() on the same Optuna storage, which hands every worker its own trials. A worker
killed mid-trial leaves that trial RUNNING: a worker on the same machine fails it after its own
next trial (hctune.search.storage.fail_orphans: the owner's pid is gone), one on another machine
once its heartbeat has been silent for the grace period (HEARTBEAT_SECONDS, GRACE_SECONDS, or
the HCTUNE_HEARTBEAT_SECONDS / HCTUNE_GRACE_SECONDS environment); either way it is queued once
more with the same parameters, and the others carry on.

Once the search is done, the worker that closes the study measures the other allocators on its
traces and, when the study asked for it (validate_runs), runs the real program under the best
settings: hctune.validate.validate, what `hctune validate` runs, on this worker's machine."""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import socket
import threading
import time

from hctune import jobs
from hctune.db import Database
from hctune.errors import DatabaseUnavailable, HctuneError, database_error_line, is_database_error
from hctune.search import options as _options
from hctune.search import study as _study
from hctune.search.storage import (OWNER, default_url, env_seconds, fail_orphans,
                                   heartbeat_seconds, open_storage, this_worker, worker_is_gone)
from hctune import allocators, compare
from hctune import validate as _validate

IDLE_SECONDS = 1.0
MAX_WAIT_SECONDS = 30   # the longest wait for a lost database; HCTUNE_WORKER_MAX_WAIT_SECONDS
ORIGIN_ENV = "HCTUNE_WORKER_ORIGIN"   # `serve --workers N` names its local workers with it


class Presence:
    """This worker's row in hc_workers (the service's /workers page): what it does (idle, or a
    state of hctune.jobs on a study, and the trial it measures or, between two, measured last),
    said at once when it changes and every heartbeat interval by a thread, so a worker whose
    beats stop is seen as dead.
    A beat that fails (the database is away) is skipped: the next one says it again."""

    def __init__(self, db_path, origin: str | None = None):
        self.db_path = db_path
        self.id = this_worker()
        self.origin = origin if origin is not None else os.environ.get(ORIGIN_ENV) or None
        self.started = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        self.state, self.study = "idle", None
        self._trial = None          # () -> the trial number this worker measures, or None
        self._last = None           # the trial it last said it started, in this state
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = None

    def set(self, state: str, study: str | None = None, trial=None):
        with self._lock:
            self.state, self.study, self._trial, self._last = state, study, trial, None
        self.beat()

    def measuring(self, trial: int):
        """Said by the search as it starts a trial (Options.on_trial)."""
        with self._lock:
            self._last = trial
        self.beat(trial)

    def beat(self, trial: int | None = None):
        with self._lock:
            state, study, trial_of, last = self.state, self.study, self._trial, self._last
        with contextlib.suppress(Exception):   # a missed beat is not worth a failure
            if trial is None and trial_of is not None:
                trial = trial_of()
        if trial is None:       # between two trials: the one it measured last
            trial = last
        with contextlib.suppress(Exception):
            with Database(self.db_path) as db:
                jobs.worker_beat(db, self.id, socket.gethostname(), os.getpid(), self.started,
                                 state, study, trial, self.origin)

    def __enter__(self):
        interval = heartbeat_seconds()[0]

        def run():
            while not self._stop.wait(interval):
                self.beat()
        self.beat()
        self._thread = threading.Thread(target=run, name="hctune-presence", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.set("stopped")


def _measuring(storage, study: str, me: str):
    """() -> the number of the trial this worker (`me`, the owner its trials are stamped
    with) is measuring in `study`, or None."""
    import optuna  # deferred: Optuna (hctune.search.storage has it loaded already)

    def trial():
        sid = storage.get_study_id_from_name(study)
        for t in storage.get_all_trials(sid, deepcopy=False,
                                        states=(optuna.trial.TrialState.RUNNING,)):
            if t.system_attrs.get(OWNER) == me:
                return t.number
        return None
    return trial


def options_of(row, storage: str | None, log=None) -> _options.Options:
    """The queued study's options, parsed once (hctune.search.options, the model the CLI and
    the service build too); allocators ["installed"] (options.DEFAULT_ALLOCATORS, the service's
    default as `search`'s) become HC and every allocator installed on this worker's
    machine; a study stored without allocators is HC alone (options.from_json)."""
    opts = _options.from_json(row["options_json"], study=row["study"], storage=storage)
    opts.allocators = _study.expand_allocators(opts.allocators, log)
    return opts


def compare_others(db_path, trace_ids, rounds: int, log=print) -> None:
    """Measure the other allocators installed here (jemalloc, mimalloc, tcmalloc, ...) on the
    study's traces, interleaved (hctune.compare), into hc_measurements, where the study's page
    and report read them beside glibc and the tuned HC."""
    names = []
    for n in compare.DEFAULT_ALLOCATORS:
        try:
            allocators.resolve(n)
            names.append(n)
        except HctuneError:
            pass   # not installed on this worker
    with Database(db_path) as db:
        for tid in trace_ids:
            path = _study.registered_trace(db, tid).path
            compare.compare(path, names, (), rounds=rounds, repeat=1, on_result=lambda e, r: (
                db.add_measurement(tid, r["allocator"], None, "time", 1, r)))
    log(f"compared {', '.join(names)} on {len(trace_ids)} trace(s)")


def _invocation(db: Database, trace_ids) -> dict | None:
    for tid in reversed(trace_ids):
        inv = db.invocation(db.trace(tid))
        if inv:
            return inv
    return None


def validate_study(db_path, row, opts: _options.Options, log=print) -> dict | None:
    """Real runs of the study's program under its best settings, generic HC, glibc and the
    others installed here, when the study asked for them (options validate_runs, validate_top):
    hctune.validate.validate, the same code `hctune validate` runs, on this machine. A program
    that cannot run here (gone, another machine's path) or a validation that fails leaves a
    failed validation with its one-line error in hc_validations; the search's results stay.
    The summary, or None."""
    runs = opts.validate_runs
    if not runs:
        return None
    name = row["study"]
    with Database(db_path) as db:
        jobs.start_validating(db, row["id"])
        before = db.latest_validation(name, done=False)
    log(f"study {name}: validating, {runs} real runs per candidate")
    try:
        s = _validate.run(db_path, _validate.ValidateOptions(
            study=name, top=opts.validate_top, runs=runs, storage=opts.storage))
        log(f"study {name}: {s['verdict']}")
        return s
    except HctuneError as e:
        err = str(e)
    except Exception as e:  # noqa: BLE001 - the search's results stay whatever happens here
        err = f"{type(e).__name__}: {e}"
    err = (err.splitlines() or [""])[0]
    with Database(db_path) as db:
        last = db.latest_validation(name, done=False)
        if last is not None and (before is None or last["id"] != before["id"]):
            vid = last["id"]        # validate() made the row, then failed (and closed it)
        else:                       # failed before it made one: the program cannot run here
            inv = _invocation(db, json.loads(row["trace_ids"])) or \
                {"argv": [], "cwd": "", "stdin": None}
            vid = db.add_validation(name, opts.objective, inv["argv"], inv["cwd"],
                                    inv["stdin"], runs)
        db.finish_validation(vid, "failed", {"error": err})
    log(f"study {name}: validation failed: {err}")
    return None


def run_one(db_path, row, storage: str | None, log=print,
            presence: Presence | None = None) -> bool:
    """Work on one claimed study until it holds its trials (or its timeout passes); True when
    this worker closed it (the others that ran it leave its state alone)."""
    # trace ids, not paths: the files may be on another machine (a shared database holds their
    # contents, and run() reads them from it; hctune.trace.store)
    trace_ids = json.loads(row["trace_ids"])
    opts = options_of(row, storage or default_url(db_path),
                      lambda line: log(f"study {row['study']}: {line}"))
    target = opts.trials
    st = open_storage(opts.storage)
    if presence is not None:
        presence.set("running", row["study"], _measuring(st, row["study"], this_worker()))

    def cancelled() -> bool:
        with Database(db_path) as db:
            return jobs.cancelled(db, row["id"])
    opts.stop_when = cancelled      # asked after every trial
    if presence is not None:
        opts.on_trial = presence.measuring
    while True:
        # after every trial the row says again what this worker measures (none, for a moment)
        res = _study.run(db_path, trace_ids, opts,
                         progress=(lambda *_: presence.beat()) if presence is not None else None)
        if cancelled():
            log(f"study {row['study']}: cancelled; stopped after {res['finished']} trials")
            return False
        # run() stops when the study as a whole holds `target` finished trials; a run cut short
        # by a worker's death elsewhere (its trial failed) goes round again (one that stopped
        # because others measure the last trials has waited for them: search.study.run).
        # (evaluated: finished, or pruned as lost, search/study.py's count toward --trials)
        if opts.timeout is not None or target is None or \
                res.get("evaluated", res["finished"]) >= target:
            log(f"study {row['study']}: {res['finished']} finished, {res['failed']} failed")
            break
    # a sibling on this machine killed during this worker's last trial: no trial stays RUNNING
    # (not retried: the study holds its trials)
    fail_orphans(st, st.get_study_id_from_name(row["study"]), retry=False)
    rounds = opts.compare_rounds
    me = this_worker()
    with Database(db_path) as db:
        # not twice when several workers ran the study
        mine = jobs.start_comparing(db, row["id"], closer=me)
    if mine:
        with _beating(db_path, row["id"], me):
            if rounds:
                if presence is not None:
                    presence.set("comparing", row["study"])
                compare_others(db_path, trace_ids, rounds, log)
            if presence is not None and opts.validate_runs:
                presence.set("validating", row["study"])
            validate_study(db_path, row, opts, log)
    return mine


@contextlib.contextmanager
def _beating(db_path, qid: int, me: str):
    """While the block runs, a thread says every heartbeat interval that this worker is alive
    (hc_queue.beat), so that others take the study up only if it dies (requeue_stuck)."""
    interval = heartbeat_seconds()[0]
    stop = threading.Event()

    def beat():
        while not stop.wait(interval):
            with contextlib.suppress(Exception):   # a missed beat is not worth a failure
                with Database(db_path) as db:
                    jobs.beat(db, qid, me)
    t = threading.Thread(target=beat, name="hctune-beat", daemon=True)
    t.start()
    try:
        yield
    finally:
        stop.set()
        t.join()


def requeue_stuck(db_path, log=print) -> None:
    """Studies a dead worker left comparing or validating go back to running (one on this
    machine at once, by its pid; one elsewhere once its beat is older than the grace period)."""
    grace = heartbeat_seconds()[1]
    stale = (_dt.datetime.now(_dt.timezone.utc) - _dt.timedelta(seconds=grace)).isoformat(
        timespec="seconds")
    with Database(db_path) as db:
        for name in jobs.requeue_stuck(db, stale, worker_is_gone):
            log(f"worker: study {name} was left unfinished by a dead worker; taking it up")


def _lost_database(e: BaseException) -> bool:
    """The database or the storage went away (a server restarted, a network cut): not the
    study's fault; the worker waits and goes on."""
    return isinstance(e, DatabaseUnavailable) or is_database_error(e)


def loop(db_path, storage: str | None = None, once: bool = False, log=print) -> int:
    """Claim and run studies until interrupted (or, with once, until the queue is empty). While
    the database is unreachable the worker waits, longer each time up to max_wait_seconds(), and
    a study it was running stays queued for the next claim. The worker beats in hc_workers
    all along (Presence) and says "stopped" when it ends."""
    with Presence(db_path) as presence:
        return _loop(db_path, storage, once, log, presence)


def max_wait_seconds() -> int:
    """The longest wait between two tries of a lost database: HCTUNE_WORKER_MAX_WAIT_SECONDS,
    else MAX_WAIT_SECONDS (a test that restarts the database shortens it)."""
    return env_seconds("HCTUNE_WORKER_MAX_WAIT_SECONDS", MAX_WAIT_SECONDS)


def _loop(db_path, storage, once, log, presence: Presence) -> int:
    done, wait, longest = 0, IDLE_SECONDS, max_wait_seconds()
    while True:
        try:
            requeue_stuck(db_path, log)
            with Database(db_path) as db:
                row = jobs.claim(db)
        except Exception as e:
            if not _lost_database(e):
                raise
            log(f"worker: database unreachable ({_one_line(e)}); trying again in {wait:.0f} s")
            time.sleep(wait)
            wait = min(wait * 2, longest)
            continue
        wait = IDLE_SECONDS
        if row is None:
            if once:
                return done
            time.sleep(IDLE_SECONDS)
            continue
        log(f"worker: study {row['study']} (queue #{row['id']})")
        closes = True
        try:
            closes = run_one(db_path, row, storage, log, presence)
            err = None
        except Exception as e:  # noqa: BLE001 - a study's failure must not kill the worker
            if _lost_database(e):
                # it stays running in the queue: this worker, or another, takes it up again
                log(f"worker: study {row['study']}: lost the database ({_one_line(e)})")
                continue
            err = str(e) if isinstance(e, HctuneError) else f"{type(e).__name__}: {e}"
            err = (err.splitlines() or [""])[0]
        if closes or err:
            with Database(db_path) as db:
                jobs.finish(db, row["id"], err)
        if err:
            log(f"worker: study {row['study']} failed: {err}")
        presence.set("idle")
        done += 1


def _one_line(e: BaseException) -> str:
    if isinstance(e, HctuneError):
        return str(e)
    return database_error_line(e, None)
