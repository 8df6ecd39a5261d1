"""Where a study lives: Optuna's RDB storage, in the results SQLite file by default (Optuna's
tables beside hctune's hc_* tables) or on a PostgreSQL server that several `hctune search`
processes on several machines share (Optuna's own distributed mode)."""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import os
import re
import socket
import time
import warnings
from pathlib import Path

import optuna
import sqlalchemy
import sqlalchemy.event
import sqlalchemy.exc

from hctune.db import database_url
from hctune.errors import DatabaseUnavailable, HctuneError, redact

# A worker that stops beating (killed, machine lost) has its RUNNING trial failed by the next
# worker or the next run after this long (Optuna's heartbeat / fail_stale_trials), and retried
# once (retry_failed). The environment can shorten both (tests), e.g. HCTUNE_HEARTBEAT_SECONDS=1
# HCTUNE_GRACE_SECONDS=3; they are read when a storage is opened.
HEARTBEAT_SECONDS = 10
GRACE_SECONDS = 30


def env_seconds(var: str, default: int) -> int:
    """The environment's `var` in whole seconds (at least 1), else `default`; anything else
    is a one-line HctuneError."""
    text = os.environ.get(var, "").strip()
    if not text:
        return default
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise HctuneError(f"{var} must be a whole number of seconds (at least 1), not {text!r}")
    return value


def heartbeat_seconds() -> tuple[int, int]:
    """(heartbeat interval, grace period) in seconds: HCTUNE_HEARTBEAT_SECONDS and
    HCTUNE_GRACE_SECONDS, else HEARTBEAT_SECONDS and GRACE_SECONDS. The grace period is kept
    longer than the interval (Optuna fails a live trial otherwise)."""
    beat = env_seconds("HCTUNE_HEARTBEAT_SECONDS", HEARTBEAT_SECONDS)
    grace = env_seconds("HCTUNE_GRACE_SECONDS", GRACE_SECONDS)
    if grace <= beat:
        raise HctuneError(f"HCTUNE_GRACE_SECONDS ({grace}) must be longer than the heartbeat "
                          f"interval ({beat} s)")
    return beat, grace


def default_url(db_path) -> str:
    """Optuna's storage when none is named: the results database itself (its SQLite file, or
    the PostgreSQL database hctune's tables are in)."""
    return database_url(db_path)


def _serialise_sqlite(engine):
    """Make every SQLite transaction BEGIN IMMEDIATE (and commits cheaper, see below). SQLite ignores SELECT ... FOR UPDATE, so
    two workers (--jobs threads, or processes on one file) could otherwise both read a queued
    trial as WAITING and both run it; taking the write lock at BEGIN serialises them."""
    @sqlalchemy.event.listens_for(engine, "connect")
    def _no_implicit_begin(dbapi_connection, record):
        dbapi_connection.isolation_level = None
        # WAL with synchronous=NORMAL: a commit survives the process dying (Ctrl-C, crash);
        # only a power cut may lose the last ones. Saves an fsync per trial attribute.
        dbapi_connection.execute("PRAGMA journal_mode=WAL")
        dbapi_connection.execute("PRAGMA synchronous=NORMAL")

    @sqlalchemy.event.listens_for(engine, "begin")
    def _begin_immediate(connection):
        connection.exec_driver_sql("BEGIN IMMEDIATE")

    engine.dispose()  # connections made before the listeners are dropped


# The system attribute naming the process that runs a trial: "host:pid:start", start being the
# process's start time in clock ticks (/proc/<pid>/stat), so a reused pid is not taken for it.
OWNER = "hctune:owner"


def _start_ticks(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rindex(b")") + 2:].split()
    if fields[0] == b"Z":
        return None                       # dead, not yet reaped by its parent
    return fields[19].decode()            # field 22, starttime


def this_worker() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{_start_ticks(os.getpid()) or 0}"


def worker_is_gone(owner: str) -> bool:
    """True when `owner` ran on this machine and that process no longer exists. Owners on other
    machines are never judged here (Optuna's heartbeat fails their trials after GRACE_SECONDS)."""
    try:
        host, pid, start = owner.rsplit(":", 2)
        pid = int(pid)
    except ValueError:
        return False
    if host != socket.gethostname():
        return False
    if Path("/proc/self/stat").exists():
        now = _start_ticks(pid)
        # gone, or the pid now belongs to another process
        return now is None or (start != "0" and now != start)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


class Storage(optuna.storages.RDBStorage):
    """Optuna's RDB storage that stamps each trial it starts with its owner (OWNER), in the same
    transaction that creates the trial, so a later run can tell a trial whose process was
    killed (SIGKILL, OOM killer, power cut) from one a live worker is measuring."""

    owner: str | None = None

    def _create_new_trial(self, study_id, template_trial=None):
        # (Optuna's cache in front of the storage calls this one, not create_new_trial)
        if template_trial is None and self.owner:
            template_trial = optuna.trial.FrozenTrial(
                number=0, state=optuna.trial.TrialState.RUNNING, value=None,
                datetime_start=datetime.datetime.now(), datetime_complete=None, params={},
                distributions={}, user_attrs={}, system_attrs={OWNER: self.owner},
                intermediate_values={}, trial_id=0)
        return super()._create_new_trial(study_id, template_trial)

    def set_trial_state_values(self, trial_id, state, values=None):
        if state != optuna.trial.TrialState.RUNNING or not self.owner:
            return super().set_trial_state_values(trial_id, state, values)
        # A queued (WAITING) trial this worker is taking: stamped and turned RUNNING in one
        # transaction (the trial's row locked FOR UPDATE; SQLite: BEGIN IMMEDIATE), so it is never
        # RUNNING without its owner, and a worker that loses the race for it stamps nothing.
        # (Stamping in separate writes before and after let the loser's stamp land last: the
        # trial then named a live worker and a killed winner's trial was never failed.)
        # Optuna's own set_trial_state_values, with the stamp added.
        from optuna.storages._rdb import models  # deferred: Optuna's internals, for a stamp
        from optuna.storages._rdb.storage import _create_scoped_session  # deferred: (as above)
        try:
            with _create_scoped_session(self.scoped_session) as session:
                trial = models.TrialModel.find_or_raise_by_id(trial_id, session, for_update=True)
                self.check_trial_is_updatable(trial_id, trial.state)
                if trial.state != optuna.trial.TrialState.WAITING:
                    return False
                self._set_trial_attr_without_commit(session, models.TrialSystemAttributeModel,
                                                    trial_id, OWNER, self.owner)
                trial.state = optuna.trial.TrialState.RUNNING
                trial.datetime_start = datetime.datetime.now()
        except sqlalchemy.exc.IntegrityError:
            return False
        return True


# A retried trial's user attributes: where it comes from (the seed's label stays).
RETRY_OF = "retry_of"


def retry_failed(storage: optuna.storages.BaseStorage, study_id: int, failed) -> int | None:
    """Queue the trial `failed` (FrozenTrial of a trial whose process died) again with the same
    parameters, once: a retry that dies too is not retried. The new trial waits behind those
    already queued (Optuna takes waiting trials in order). Its number, or None.

    Optuna's RetryFailedTrialCallback(max_retry=1) would do the same but copy the dead trial's
    attributes (its error, its worker, its owner) into the retry; this one keeps the seed's label
    and the same system attributes Optuna's callback sets (failed_trial, retry_history), so
    RetryFailedTrialCallback.retried_trial_number() reads it."""
    history = list(failed.system_attrs.get("retry_history", []))
    # its parameters: those it had drawn, and a queued seed's values it had not drawn yet
    params = {**failed.system_attrs.get("fixed_params", {}), **failed.params}
    if history or not params:
        return None      # a retry already, or killed before it had its parameters
    user = {RETRY_OF: failed.number}
    if failed.user_attrs.get("seed"):
        user["seed"] = failed.user_attrs["seed"]
    # Queued the way study.enqueue_trial queues (fixed_params): a seed's values off the search
    # grid (Hasan & Chang's QL_HIGH 72) are taken as they are, not checked against it.
    tid = storage.create_new_trial(study_id, template_trial=optuna.trial.create_trial(
        state=optuna.trial.TrialState.WAITING, user_attrs=user,
        system_attrs={"fixed_params": params, "failed_trial": failed.number,
                      "retry_history": [failed.number]}))
    return storage.get_trial_number_from_id(tid)


def _retry_quietly(storage, study_id: int, failed) -> None:
    try:
        retry_failed(storage, study_id, failed)
    except Exception:  # noqa: BLE001 - a retry that cannot be queued must not stop the search
        pass


def _retry_callback(study, failed) -> None:
    """RDBStorage's failed_trial_callback: trials Optuna's heartbeat check failed (a worker on
    another machine stopped beating) are retried like those fail_orphans finds."""
    _retry_quietly(study._storage, study._study_id, failed)


def fail_orphans(storage: optuna.storages.RDBStorage, study_id: int,
                 retry: bool = True) -> list[int]:
    """Mark FAIL the RUNNING trials of the study whose owner process is gone from this
    machine, or whose heartbeat is older than the grace period (an owner on another machine
    that died or lost its network: what Optuna's own check fails, here with an error naming
    it), and, with `retry`, queue each once more with the same parameters (retry_failed);
    their numbers. Cheap (two reads of the study's running trials): workers call it between
    trials."""
    failed = []
    stale = set()
    if getattr(storage, "get_heartbeat_interval", lambda: None)() is not None:
        stale = set(storage._get_stale_trial_ids(study_id))
    for t in storage.get_all_trials(study_id, deepcopy=False,
                                    states=(optuna.trial.TrialState.RUNNING,)):
        owner = t.system_attrs.get(OWNER)
        why = None
        if owner and worker_is_gone(owner):
            why = f"its process ({owner}) was killed"
        elif t._trial_id in stale:
            grace = getattr(getattr(storage, "_backend", storage), "grace_period", None)
            why = (f"its process ({owner or 'unknown'}) sent no heartbeat for more than "
                   f"{grace} s")
        if why:
            with contextlib.suppress(RuntimeError, optuna.exceptions.UpdateFinishedTrialError):
                storage.set_trial_user_attr(t._trial_id, "error", why)
                if storage.set_trial_state_values(t._trial_id, optuna.trial.TrialState.FAIL):
                    failed.append(t.number)
                    if retry:
                        _retry_quietly(storage, study_id, storage.get_trial(t._trial_id))
    return failed


@contextlib.contextmanager
def _schema_lock(url: str):
    """Serialise the creation of Optuna's tables in one SQLite file: two searches started at
    once on a new database otherwise both try CREATE TABLE and one fails ("table ... already
    exists"). The lock is flock(2) on the database's directory (no extra file is left)."""
    if not url.startswith("sqlite:///") or url == "sqlite:///:memory:":
        yield
        return
    where = Path(url[len("sqlite:///"):]).parent
    try:
        fd = os.open(where, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        yield                      # SQLite will say what is wrong with the path
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def open_storage(url: str, owner: str | None = None) -> optuna.storages.RDBStorage:
    """Optuna's RDB storage at `url`, with heartbeats; unreachable or bad URLs -> HctuneError.
    `owner` (this_worker()) stamps the trials this process starts."""
    if not re.match(r"^(sqlite|postgresql(\+\w+)?|mysql(\+\w+)?)://", url):
        raise HctuneError(f"storage {redact(url)!r} is not a database URL "
                          "(sqlite:///file.db or postgresql://user@host/db)")
    connect = {"timeout": 60} if url.startswith("sqlite") else {"connect_timeout": 10}
    beat, grace = heartbeat_seconds()
    for attempt in range(5):
        try:
            with warnings.catch_warnings(), _schema_lock(url):
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                storage = Storage(
                    url, engine_kwargs={"connect_args": connect},
                    heartbeat_interval=beat, grace_period=grace,
                    failed_trial_callback=_retry_callback)
            if url.startswith("sqlite"):
                _serialise_sqlite(storage.engine)
            storage.owner = owner
            return storage
        except (sqlalchemy.exc.OperationalError, sqlalchemy.exc.ProgrammingError) as e:
            # Another process (another machine, on PostgreSQL) made the tables between our
            # check and our CREATE TABLE: they exist now, so try again.  (SQLite says so with
            # an OperationalError, PostgreSQL's DuplicateTable is a ProgrammingError.)
            if "already exists" not in str(e):
                first = str(e).strip().splitlines()[0]
                raise DatabaseUnavailable(f"cannot use storage {redact(url)}: {first}") from None
            time.sleep(0.5 * (attempt + 1))
        except sqlalchemy.exc.IntegrityError:
            # Workers started together on an empty database race to create Optuna's tables;
            # the losers wait for the winner and then find the tables made.
            time.sleep(0.5 * (attempt + 1))
        except (sqlalchemy.exc.SQLAlchemyError, ImportError, ValueError) as e:
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise HctuneError(f"cannot use storage {redact(url)}: {first}") from None
    raise HctuneError(f"cannot use storage {redact(url)}: its tables could not be created")
