"""Where a registered trace's file is on this machine. The path it was registered with, when
that file is here and of its size; else a copy of the contents a shared database holds
(hctune.db: hc_trace_data, kept for `--db postgresql://...`), written once into the cache
directory under its content hash. This is how a worker on one machine runs a trace profiled or
uploaded on another without a shared disk."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from hctune import paths
from hctune.errors import HctuneError
from hctune.files import sha256


def _here(row) -> Path | None:
    p = Path(row["path"])
    try:
        if p.is_file() and (row["size_bytes"] is None or p.stat().st_size == row["size_bytes"]):
            return p
    except OSError:
        pass
    cached = paths.cache_dir() / "traces" / f"{row['sha256']}.trace"
    return cached if cached.is_file() else None


def available(db, row) -> bool:
    """True when local_path() can give the trace's file on this machine."""
    return _here(row) is not None or db.has_trace_data(row["sha256"])


def local_path(db, row) -> Path:
    """The file of trace `row` (an hc_traces row) on this machine; HctuneError when neither the
    file nor the database's copy is here."""
    found = _here(row)
    if found is not None:
        return found
    cached = paths.cache_dir() / "traces" / f"{row['sha256']}.trace"
    cached.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=cached.parent, prefix=".part-")
    try:
        with os.fdopen(fd, "wb") as f:
            if not db.read_trace_data(row["sha256"], f):
                raise HctuneError(
                    f"trace #{row['id']}'s file {row['path']} is not on this machine, and the "
                    "database does not hold its contents (a PostgreSQL results database does: "
                    "--db postgresql://...)")
        if sha256(tmp) != row["sha256"]:
            raise HctuneError(f"trace #{row['id']}: the database's copy does not match its hash")
        os.replace(tmp, cached)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return cached
