"""Helpers for the search and emit tests: a small real trace, running `hctune`, and a
throw-away PostgreSQL server."""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from conftest import hctune, hctune_popen  # noqa: F401  (the runner's home is conftest)
from hctune import paths

# gawk building, thinning and growing an associative array and a string: a real program with
# many small blocks, frees in the middle and a growing realloc.
GAWK_PROGRAM = ('BEGIN { for (i = 0; i < 6000; i++) a[i] = i " x"; '
                'for (i = 0; i < 6000; i += 2) delete a[i]; s = ""; '
                'for (i = 0; i < 800; i++) s = s "ab"; print length(s) }')


def need_hc():
    try:
        import hctune.render  # noqa: F401
    except ImportError as e:
        pytest.skip(f"the HC renderer is not available yet (hctune.render: {e})")


def record_gawk_trace(out: Path) -> Path:
    """A real trace of gawk, recorded with the LD_PRELOAD tracer that `make` builds."""
    tracer = paths.BUILD / "libhctrace.so"
    if not tracer.exists():
        pytest.fail(f"{tracer} is missing: run `make` first")
    gawk = shutil.which("gawk")
    if gawk is None:
        pytest.fail("gawk is not installed (.ci/run installs it)")
    env = dict(os.environ, LD_PRELOAD=str(tracer), HCTRACE_OUT=str(out))
    subprocess.run([gawk, GAWK_PROGRAM], env=env, check=True, capture_output=True)
    assert out.stat().st_size > 0
    return out


# ---- PostgreSQL ----

def _pg_bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Postgres:
    """initdb + pg_ctl in a temporary directory, on 127.0.0.1, trust authentication. PostgreSQL
    refuses to run as root (CI runs as root), so then it runs as the `postgres` user, in a
    directory of its own under the system's temporary directory: pytest's own
    (/tmp/pytest-of-root) is made 0700 again by every pytest that starts, which locks the
    `postgres` user out of a server's files mid-test (initdb: Permission denied). Its log is
    copied to `base` when it stops."""

    def __init__(self, base: Path):
        self.bin = _pg_bin()
        if self.bin is None:
            pytest.skip("PostgreSQL binaries (initdb, pg_ctl) are not installed; the Debian "
                        "package postgresql provides them")
        self.port = _free_port()
        self.user = "postgres" if os.geteuid() == 0 else None
        self.logs = base
        if self.user is not None:
            base = Path(tempfile.mkdtemp(prefix="hctune-pg-"))
            owner = pwd.getpwnam(self.user)
            os.chown(base, owner.pw_uid, owner.pw_gid)
        self.base = base
        self.data = base / "pgdata"

    def _run(self, *cmd, check=True):
        if self.user is not None:
            cmd = ("runuser", "-u", self.user, "--", *cmd)
        return subprocess.run(cmd, capture_output=True, text=True, check=check, timeout=120,
                              cwd=self.base)   # a directory the server's user may enter

    def start(self):
        self._run(str(self.bin / "initdb"), "-D", str(self.data), "-A", "trust", "-U",
                  "hctune", "--no-sync")
        for attempt in range(5):
            if self._pg_ctl_start().returncode == 0:
                break
            # the free port was taken in between (another process, an outgoing connection)
            log = (self.base / "pg.log").read_text(errors="replace")
            if "already in use" not in log or attempt == 4:
                raise AssertionError(f"PostgreSQL did not start:\n{log[-2000:]}")
            self.port = _free_port()
        deadline = time.time() + 120       # a guard: pg_ctl -w waited for it to be ready
        while time.time() < deadline:
            r = self._run(str(self.bin / "createdb"), "-h", "127.0.0.1", "-p", str(self.port),
                          "-U", "hctune", "hctune", check=False)
            if r.returncode == 0:
                return self
            time.sleep(0.5)
        raise AssertionError(f"could not create the database: {r.stderr}")

    def stop(self, keep=False):
        """Stop the server; keep: its files stay for restart(), else they go (its own
        directory, as root)."""
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w",
                  "stop", check=False)
        if keep or self.base == self.logs:
            return
        with contextlib.suppress(OSError):
            shutil.copy(self.base / "pg.log", self.logs / "pg.log")
        shutil.rmtree(self.base, ignore_errors=True)

    def _pg_ctl_start(self):
        return self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-l",
                         str(self.base / "pg.log"), "-w", "-t", "60", "-o",
                         f"-h 127.0.0.1 -p {self.port} -k {self.base} -F", "start", check=False)

    def restart(self):
        """Start again after stop(): the same data, port and database."""
        r = self._pg_ctl_start()
        assert r.returncode == 0, (self.base / "pg.log").read_text(errors="replace")[-2000:]
        return self

    @property
    def url(self) -> str:
        return f"postgresql://hctune@127.0.0.1:{self.port}/hctune"
