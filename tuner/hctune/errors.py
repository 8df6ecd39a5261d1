"""One error type for user mistakes: caught once in cli.main, printed as one line, exit code 2.

The lowest module of the package (it imports nothing of hctune): what both the error lines and
hctune.db need about database errors, `redact` and `is_driver_error`, lives here."""

import re
import sys


class HctuneError(Exception):
    """A problem the user can fix (bad input, missing file, bad setting). Never a traceback."""

    exit_code = 2

    def __init__(self, message: str, exit_code: int = 2):
        super().__init__(message)
        self.exit_code = exit_code


class NotFound(HctuneError):
    """What was named does not exist (a study's trial, a trace): exit 2 on the command line,
    404 from the service."""


class DatabaseUnavailable(HctuneError):
    """The results database or the study storage cannot be opened (a server down, a bad file):
    one line for a command; a long-running worker waits and tries again."""


def os_error_line(e: OSError) -> str:
    """An OSError as one line naming what failed and where: `/out/malloc.c: No space left on
    device`, `/nonexistent/cc: No such file or directory`."""
    what = e.strerror or str(e) or type(e).__name__
    names = [str(n) for n in (e.filename, e.filename2) if n is not None]
    return f"{' -> '.join(names)}: {what}" if names else what


def database_error_line(e: Exception, db_path: str | None) -> str:
    """A database error as one line: sqlite3's name the results file; SQLAlchemy's and
    Optuna's come from the study's storage (the same file by default, or a server)."""
    cause = e
    while cause.__cause__ is not None and not is_driver_error(cause):
        cause = cause.__cause__              # Optuna wraps SQLAlchemy, which wraps the driver
    orig = getattr(cause, "orig", None) or cause
    text = str(orig).strip().splitlines()[0] if str(orig).strip() else type(orig).__name__
    if is_driver_error(e) and db_path:       # hctune.db raises the driver's own errors
        return f"database {redact(str(db_path))}: {text}"
    return f"study storage: {text}"


def redact(url: str) -> str:
    """The URL without its password, for messages."""
    return re.sub(r"(://[^:/@]+):[^@]*@", r"\1:***@", url)


def is_driver_error(e: BaseException) -> bool:
    """A database driver's own error (sqlite3's, psycopg2's), as hctune.db raises them. sqlite3
    is looked up, not imported: an error of it exists only once something imported it."""
    sqlite3 = sys.modules.get("sqlite3")
    return (sqlite3 is not None and isinstance(e, sqlite3.Error)) or \
        type(e).__module__.startswith("psycopg2")


def is_database_error(e: BaseException) -> bool:
    if is_driver_error(e):
        return True
    mod, name = type(e).__module__ or "", type(e).__name__
    return (mod.startswith("sqlalchemy") and name in (
        "OperationalError", "DatabaseError", "InterfaceError", "ProgrammingError")) or (
        mod.startswith("optuna") and name == "StorageInternalError")
