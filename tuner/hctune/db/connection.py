"""One connection to the results database, through SQLAlchemy Core (its drivers, parameters and
pooling): a SQLite file (WAL, foreign keys on) or a PostgreSQL server. `Connection` opens it,
brings its schema up to date (hctune.db.schema) and gives the table groups of hctune.db their
three ways in: query, query_one and transaction (all of it or none)."""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import re
import sqlite3
import threading
import time
from pathlib import Path

import sqlalchemy
import sqlalchemy.event
import sqlalchemy.exc
import sqlalchemy.pool

from hctune.db import schema
from hctune.errors import DatabaseUnavailable, HctuneError, is_driver_error, redact


def holds_rows(path, tables) -> bool | None:
    """Whether the SQLite file at `path` has a row in any of `tables` (read-only; None when it
    cannot be read as a database)."""
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            names = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE "
                                               "type = 'table'")}
            return any(con.execute(f"SELECT 1 FROM {t} LIMIT 1").fetchone()
                       for t in tables if t in names)
        finally:
            con.close()
    except sqlite3.Error:
        return None


def now(precise: bool = False) -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(
        timespec="microseconds" if precise else "seconds")


_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def database_url(target) -> str:
    """The SQLAlchemy URL of a results database named by a path or a URL."""
    text = str(target)
    if _URL.match(text):
        if not re.match(r"^(sqlite|postgresql(\+psycopg2)?)://", text):
            raise HctuneError(f"database {redact(text)!r}: use a SQLite file or "
                              "postgresql://user@host/db")
        return text
    return f"sqlite:///{Path(text).resolve()}"


def is_url(target) -> bool:
    return _URL.match(str(target)) is not None


_engines: dict[str, sqlalchemy.engine.Engine] = {}
_checked: set[str] = set()      # server databases whose schema this process has checked
_engines_lock = threading.Lock()


def _wal(con, wait_s: float = 60.0):
    """Put a SQLite file in WAL mode (once per file: the mode is stored in it). Switching takes
    the file's exclusive lock and SQLite does not wait for it (no busy handler), so processes
    opening a new file together get "database is locked" at once; they try again here for as
    long as the connection's own busy timeout would wait."""
    deadline = time.monotonic() + wait_s
    delay = 0.001
    while True:
        try:
            if con.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                con.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or time.monotonic() > deadline:
                raise
        time.sleep(delay)
        delay = min(delay * 2, 0.05)


def _engine(url: str) -> sqlalchemy.engine.Engine:
    """One engine per database and process. SQLite opens the file afresh for each Database (as
    cheap as a pool, and right when the file is replaced); PostgreSQL keeps a pool."""
    with _engines_lock:
        eng = _engines.get(url)
        if eng is not None:
            return eng
        if url.startswith("sqlite"):
            eng = sqlalchemy.create_engine(url, poolclass=sqlalchemy.pool.NullPool,
                                           connect_args={"timeout": 60},
                                           isolation_level="AUTOCOMMIT")

            @sqlalchemy.event.listens_for(eng, "connect")
            def _pragmas(dbapi_connection, record):
                _wal(dbapi_connection)
                dbapi_connection.execute("PRAGMA foreign_keys=ON")
        else:
            eng = sqlalchemy.create_engine(url, pool_size=4, max_overflow=16, pool_pre_ping=True,
                                           connect_args={"connect_timeout": 10},
                                           isolation_level="AUTOCOMMIT")
        _engines[url] = eng
        return eng


class Row(dict):
    """A result row: by column name, or by position as sqlite3.Row allows."""

    def __getitem__(self, key):
        if isinstance(key, int):
            return list(self.values())[key]
        return super().__getitem__(key)


class _Session:
    """What Database.transaction() yields: execute(sql, **params) -> result, with one() and
    all() for the rows."""

    def __init__(self, conn):
        self._conn = conn

    def execute(self, sql: str, **params):
        return _Result(self._conn.execute(sqlalchemy.text(sql), params))


class _Result:
    def __init__(self, result):
        self._r = result
        self.rowcount = result.rowcount

    def one(self) -> Row | None:
        m = self._r.mappings().fetchone() if self._r.returns_rows else None
        return None if m is None else Row(m)

    def all(self) -> list[Row]:
        return [Row(m) for m in self._r.mappings()] if self._r.returns_rows else []

    def scalar(self):
        row = self.one()
        return None if row is None else row[0]


@contextlib.contextmanager
def _driver_errors():
    """SQLAlchemy's wrapping taken off: the driver's own error (sqlite3's, psycopg2's), which
    hctune.cli prints as one line naming the database."""
    try:
        yield
    except sqlalchemy.exc.DBAPIError as e:
        if isinstance(e.orig, BaseException):
            raise e.orig from None
        raise


class Connection:
    """A connection to the results database (a SQLite path, or a URL); use as a context manager
    or call close()."""

    def __init__(self, target: str | os.PathLike):
        self.target = str(target)
        if not is_url(target) and Path(target).is_dir():
            raise HctuneError(f"database {target} is a directory")
        self.url = database_url(target)
        self.where = redact(self.url) if is_url(target) else str(target)
        self.dialect = "sqlite" if self.url.startswith("sqlite") else "postgresql"
        # A shared database (a server) holds the traces' contents too: its workers may run on
        # machines that do not have the files.
        self.shared = self.dialect != "sqlite"
        self._conn = None
        try:
            self._conn = _engine(self.url).connect()
            # A server database's schema is checked once per process (a round trip saved on
            # every open: the service opens one per request); a file's on every open, as the
            # file may have been replaced.
            if self.dialect == "sqlite" or self.url not in _checked:
                schema.migrate(self)
                _checked.add(self.url)
        except Exception as e:
            self.close()
            if isinstance(e, sqlalchemy.exc.DBAPIError):
                e = e.orig
            if not is_driver_error(e):
                raise
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise DatabaseUnavailable(f"cannot open database {self.where}: {first}") from None
        except BaseException:
            self.close()
            raise

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def query(self, sql: str, **params) -> list[Row]:
        """The rows of one statement, outside any transaction (each read sees the latest
        committed state)."""
        with _driver_errors():
            return _Result(self._conn.execute(sqlalchemy.text(sql), params)).all()

    def query_one(self, sql: str, **params) -> Row | None:
        rows = self.query(sql, **params)
        return rows[0] if rows else None

    @contextlib.contextmanager
    def transaction(self):
        """One transaction: all of it or none. On SQLite it takes the write lock at once (BEGIN
        IMMEDIATE), so a read-then-write inside it is atomic across processes; PostgreSQL's
        READ COMMITTED plus row locks (FOR UPDATE) and unique keys do the same there."""
        with _driver_errors():
            self._conn.exec_driver_sql("BEGIN IMMEDIATE" if self.dialect == "sqlite" else "BEGIN")
            try:
                yield _Session(self._conn)
            except BaseException:
                self._conn.exec_driver_sql("ROLLBACK")
                raise
            self._conn.exec_driver_sql("COMMIT")
