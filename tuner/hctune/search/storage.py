"""Where a study lives: Optuna's RDB storage, in the results SQLite file by default (Optuna's
tables beside hctune's hc_* tables) or on a PostgreSQL server that several `hctune search`
processes on several machines share (Optuna's own distributed mode)."""

from __future__ import annotations

import re
import time
import warnings
from pathlib import Path

import optuna
import sqlalchemy
import sqlalchemy.event
import sqlalchemy.exc

from hctune.errors import HctuneError

# A worker that stops beating (killed, machine lost) has its RUNNING trial failed by the next
# worker or the next run after this long (Optuna's heartbeat / fail_stale_trials).
HEARTBEAT_SECONDS = 10
GRACE_SECONDS = 30


def default_url(db_path) -> str:
    return f"sqlite:///{Path(db_path).resolve()}"


def redact(url: str) -> str:
    """The URL without its password, for messages and the database."""
    return re.sub(r"(://[^:/@]+):[^@]*@", r"\1:***@", url)


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


def open_storage(url: str) -> optuna.storages.RDBStorage:
    """Optuna's RDB storage at `url`, with heartbeats; unreachable or bad URLs -> HctuneError."""
    if not re.match(r"^(sqlite|postgresql(\+\w+)?|mysql(\+\w+)?)://", url):
        raise HctuneError(f"storage {redact(url)!r} is not a database URL "
                          "(sqlite:///file.db or postgresql://user@host/db)")
    connect = {"timeout": 60} if url.startswith("sqlite") else {"connect_timeout": 10}
    for attempt in range(5):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                storage = optuna.storages.RDBStorage(
                    url, engine_kwargs={"connect_args": connect},
                    heartbeat_interval=HEARTBEAT_SECONDS, grace_period=GRACE_SECONDS)
            if url.startswith("sqlite"):
                _serialise_sqlite(storage.engine)
            return storage
        except sqlalchemy.exc.IntegrityError:
            # Workers started together on an empty database race to create Optuna's tables;
            # the losers wait for the winner and then find the tables made.
            time.sleep(0.5 * (attempt + 1))
        except (sqlalchemy.exc.SQLAlchemyError, ImportError, ValueError) as e:
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise HctuneError(f"cannot use storage {redact(url)}: {first}") from None
    raise HctuneError(f"cannot use storage {redact(url)}: its tables could not be created")
