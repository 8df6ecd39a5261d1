"""Register a trace in the results database (hctune.db): content hash, events, statistics."""

from __future__ import annotations

from pathlib import Path

from hctune.db import Database
from hctune.files import sha256
from hctune.trace.stats import stats as trace_stats




def register(db_path, path, tracer: str, st: dict | None = None,
             invocation: dict | None = None) -> tuple[int, dict]:
    """Add the trace (idempotent by content); returns (trace id, its statistics).
    `invocation` ({"argv", "cwd", "stdin"}) is how the program was run, for `hctune validate`."""
    path = Path(path)
    st = st if st is not None else trace_stats(path)
    with Database(db_path) as db:
        tid = db.add_trace(path, sha256(path), command=st.get("command"), tracer=tracer,
                           events=st["events"], size_bytes=path.stat().st_size, stats=st,
                           invocation=invocation)
    return tid, st
