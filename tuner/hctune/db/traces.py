"""The traces: their rows (hc_traces) and, in a shared database, their contents
(hc_trace_data, in TRACE_PART pieces, so workers on machines without the files can read them)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from hctune.db.connection import now
from hctune.errors import HctuneError

TRACE_PART = 4 << 20


def _id_list(text) -> list:
    """A trace_ids column's ids ([] for anything else)."""
    try:
        v = json.loads(text)
    except (TypeError, ValueError):
        return []
    return v if isinstance(v, list) else []


class Traces:
    """hctune.db.Database's questions about traces."""

    def add_trace(self, path, sha256, command=None, tracer=None, events=None, size_bytes=None,
                  stats=None, invocation: dict | None = None) -> int:
        """Register a trace (idempotent by content hash); returns its id. In a shared database
        the file's contents are stored too (hc_trace_data), when the file is here."""
        path = str(Path(path).resolve())
        inv = invocation or {}
        # a server's (hctune profile --load): {"argv": [...], "server": {load, ready, ...}}
        argv = {"argv": inv["argv"], "server": inv["server"]} if inv.get("server") else \
            inv.get("argv")
        inv_cols = {"argv": json.dumps(argv) if inv.get("argv") else None,
                    "cwd": inv.get("cwd"), "stdin": inv.get("stdin")}
        with self.transaction() as c:
            tid = c.execute("SELECT id FROM hc_traces WHERE sha256 = :sha", sha=sha256).scalar()
            if tid is not None:
                c.execute("UPDATE hc_traces SET path = :path WHERE id = :id", path=path, id=tid)
                if invocation:
                    c.execute("UPDATE hc_traces SET argv_json = :argv, cwd = :cwd,"
                              " stdin_path = :stdin WHERE id = :id", id=tid, **inv_cols)
            else:
                tid = c.execute(
                    "INSERT INTO hc_traces (path, sha256, command, tracer, events, size_bytes,"
                    " stats_json, created, argv_json, cwd, stdin_path) VALUES (:path, :sha,"
                    " :command, :tracer, :events, :size, :stats, :created, :argv, :cwd, :stdin)"
                    " ON CONFLICT (sha256) DO NOTHING RETURNING id",
                    path=path, sha=sha256, command=command, tracer=tracer, events=events,
                    size=size_bytes, created=now(), **inv_cols,
                    stats=json.dumps(stats, sort_keys=True) if stats is not None else None,
                ).scalar()
                if tid is None:   # registered by another machine meanwhile (PostgreSQL)
                    tid = c.execute("SELECT id FROM hc_traces WHERE sha256 = :sha",
                                    sha=sha256).scalar()
            if self.shared and Path(path).is_file():
                self._store_trace_data(c, sha256, Path(path))
            return tid

    @staticmethod
    def invocation(trace_row) -> dict | None:
        """{"argv", "cwd", "stdin"} of a profiled trace (what `validate` runs again), or None
        for traces that were imported or recorded before hctune kept it."""
        if trace_row is None or not trace_row["argv_json"]:
            return None
        argv = json.loads(trace_row["argv_json"])
        server = argv.get("server") if isinstance(argv, dict) else None
        out = {"argv": argv["argv"] if isinstance(argv, dict) else argv, "cwd": trace_row["cwd"],
               "stdin": trace_row["stdin_path"]}
        if server:
            out["server"] = server    # a server: its load, readiness and stop signal
        return out

    def set_trace_stats(self, trace_id: int, stats: dict):
        with self.transaction() as c:
            c.execute("UPDATE hc_traces SET stats_json = :st WHERE id = :id",
                      st=json.dumps(stats, sort_keys=True), id=trace_id)

    def trace(self, trace_id: int):
        return self.query_one("SELECT * FROM hc_traces WHERE id = :id", id=trace_id)

    def trace_by_path(self, path):
        return self.query_one("SELECT * FROM hc_traces WHERE path = :p ORDER BY id DESC",
                              p=str(Path(path).resolve()))

    def latest_trace(self):
        """The most recently registered trace, or None."""
        return self.query_one("SELECT * FROM hc_traces ORDER BY id DESC LIMIT 1")

    def delete_trace(self, trace_id: int) -> dict | None:
        """Delete a trace no study (queued or run) uses, in one transaction: its row, the
        allocators' measurements on it and its stored contents when no other row shares them.
        None: no such trace; {"users": [study names]}: in use, nothing deleted; else {"row":
        the deleted row, "shared": another row has the same contents, "deleted": counts}."""
        with self.transaction() as c:
            row = c.execute("SELECT * FROM hc_traces WHERE id = :id", id=trace_id).one()
            if row is None:
                return None
            users = sorted({r["name"] for r in c.execute(
                "SELECT study AS name, trace_ids FROM hc_queue UNION ALL "
                "SELECT name, trace_ids FROM hc_studies").all()
                if trace_id in _id_list(r["trace_ids"])})
            if users:
                return {"users": users}
            deleted = {"measurements": c.execute(
                "DELETE FROM hc_measurements WHERE trace_id = :id", id=trace_id).rowcount}
            c.execute("DELETE FROM hc_traces WHERE id = :id", id=trace_id)
            same = c.execute("SELECT 1 FROM hc_traces WHERE sha256 = :h",
                             h=row["sha256"]).one()
            deleted["stored_parts"] = 0 if same else c.execute(
                "DELETE FROM hc_trace_data WHERE sha256 = :h", h=row["sha256"]).rowcount
        return {"row": row, "shared": same is not None, "deleted": deleted}

    def traces(self):
        return self.query("SELECT * FROM hc_traces ORDER BY id")

    # trace contents (shared databases)

    @staticmethod
    def _store_trace_data(c, sha256: str, path: Path):
        """The file's contents in TRACE_PART pieces, within the caller's transaction (all or
        none); nothing when they are stored already. The file must hash to `sha256`."""
        if c.execute("SELECT 1 FROM hc_trace_data WHERE sha256 = :sha AND part = 0",
                     sha=sha256).one():
            return
        h = hashlib.sha256()
        with open(path, "rb") as f:
            part = 0
            while chunk := f.read(TRACE_PART):
                h.update(chunk)
                c.execute("INSERT INTO hc_trace_data (sha256, part, data) VALUES (:sha, :part,"
                          " :data)", sha=sha256, part=part, data=chunk)
                part += 1
        if h.hexdigest() != sha256:
            raise HctuneError(f"trace {path} changed while it was being stored; register it "
                              "again")

    def has_trace_data(self, sha256: str) -> bool:
        return self.query_one("SELECT 1 FROM hc_trace_data WHERE sha256 = :sha AND part = 0",
                              sha=sha256) is not None

    def read_trace_data(self, sha256: str, out) -> bool:
        """Write the stored contents of trace `sha256` to the open binary file `out`; False when
        the database does not hold them. One piece is read at a time."""
        n = self.query_one("SELECT COUNT(*) AS n FROM hc_trace_data WHERE sha256 = :sha",
                           sha=sha256)["n"]
        if not n:
            return False
        for part in range(n):
            row = self.query_one("SELECT data FROM hc_trace_data WHERE sha256 = :sha AND"
                                 " part = :part", sha=sha256, part=part)
            if row is None:
                raise HctuneError(f"trace {sha256[:12]}: piece {part} is missing in the database")
            out.write(bytes(row["data"]))
        return True
