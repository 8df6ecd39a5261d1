"""hctune's own tables in the results database: a SQLite file by default (Optuna's tables share
it), or a PostgreSQL server that the machines of a team share (`--db postgresql://...`).

Schema changes bump SCHEMA_VERSION and add a step to _MIGRATIONS; old databases are upgraded on
open. The steps are written in SQLite's words; on PostgreSQL the same text runs with its types
mapped (_POSTGRES_TYPES). Every write is one transaction, so a crash or Ctrl-C never leaves a
half-written row. SQL goes through SQLAlchemy Core (its drivers, parameters and pooling).

The package is the one door to those tables: connection (opening, transactions), schema (the
tables and their migrations), and one module a group of tables whose questions `Database` asks
(traces, measurements, studies, sessions, validations), and the job queue's moves (queue:
hctune.jobs gives them to the service and its runner).
"""

from __future__ import annotations

from hctune.db import schema  # noqa: F401 (hctune.db.schema: the tables and their steps)
from hctune.db.connection import (Connection, Row, _checked, database_url, holds_rows,  # noqa: F401
                                  is_url, now)
from hctune.db.measurements import Measurements
from hctune.db.schema import _MIGRATIONS, SCHEMA_VERSION  # noqa: F401 (said with the schema)
from hctune.db.sessions import Sessions
from hctune.db.studies import Studies
from hctune.db.traces import TRACE_PART, Traces  # noqa: F401
from hctune.db.validations import Validations
from hctune.errors import redact  # noqa: F401 (re-exported)


class Database(Traces, Measurements, Studies, Sessions, Validations, Connection):
    """A connection to the results database (a SQLite path, or a URL) and its tables'
    questions; use as a context manager or call close()."""
