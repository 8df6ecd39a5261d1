"""OS errors are one line (issue 11, fault 4): an unwritable output, a file-size limit (a full
disk as the program sees it), a missing compiler and a read-only database each give one
`hctune: error: ...` line naming what and where, exit 2, and leave nothing half-written."""

import os
import resource
import sqlite3

from conftest import hctune as run_hctune
from hctune import db as _db
from hctune.cli import main


def hctune(*args, cwd, env=None, fsize=None):
    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    return run_hctune(None, *args, check=False, cwd=cwd, env=env,
                      preexec_fn=limit if fsize else None)


def one_line(res):
    assert res.returncode == 2, res.stdout + res.stderr
    assert "Traceback" not in res.stderr, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hctune: error: "), res.stderr
    return lines[0]


def test_unwritable_output(tmp_path):
    line = one_line(hctune("emit", "--preset", "generic", "-o", "/proc/x/malloc.c", cwd=tmp_path))
    assert "/proc/x/malloc.c" in line


def test_file_size_limit_leaves_nothing(tmp_path):
    # RLIMIT_FSIZE makes write(2) fail with EFBIG part-way through, as a full disk would
    # (ENOSPC) without needing to mount one; Python ignores SIGXFSZ so the error reaches us.
    line = one_line(hctune("emit", "--preset", "generic", "-o", "out/malloc.c", cwd=tmp_path,
                           fsize=4096))
    assert "out/malloc.c" in line and "too large" in line.lower()
    assert list((tmp_path / "out").iterdir()) == []       # no half-written file, no temporary


def test_missing_compiler(tmp_path):
    env = {**os.environ, "CC": "/nonexistent/cc"}
    line = one_line(hctune("emit", "--preset", "generic", "-o", "malloc.c", "--so", "libhc.so",
                           cwd=tmp_path, env=env))
    assert "/nonexistent/cc" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_read_only_database(tmp_path, capsys, monkeypatch):
    # chmod does not stop root (CI), so the driver's own error is raised where the write happens.
    def readonly(*a, **k):
        raise sqlite3.OperationalError("attempt to write a readonly database")
    monkeypatch.setattr(_db.Database, "add_trace", readonly)
    trace = tmp_path / "t.hct"
    rc = main(["--db", str(tmp_path / "ro.db"), "profile", "-o", str(trace), "true"])
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err, err
    assert err.strip().splitlines() == [f"hctune: error: database {tmp_path / 'ro.db'}: "
                                        "attempt to write a readonly database"]


def test_storage_error_is_one_line(tmp_path, capsys, monkeypatch):
    """An error of the study's storage mid-search (Optuna wraps SQLAlchemy's, which wraps the
    driver's) is one line with the driver's words."""
    import optuna
    import sqlalchemy.exc

    from hctune.search import study

    def broken(*a, **k):
        try:
            raise sqlalchemy.exc.OperationalError("UPDATE trials", {}, sqlite3.OperationalError(
                "attempt to write a readonly database"))
        except sqlalchemy.exc.OperationalError as e:
            raise optuna.exceptions.StorageInternalError("An exception is raised during the "
                                                         "commit.") from e
    monkeypatch.setattr(study, "run", broken)
    rc = main(["--db", str(tmp_path / "h.db"), "search"])
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("hctune")]   # (and the bar)
    assert rc == 2 and "Traceback" not in err, err
    assert errors == ["hctune: error: study storage: attempt to write a readonly database"], err
