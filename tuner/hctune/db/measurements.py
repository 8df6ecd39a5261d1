"""The replay's numbers: the HC builds measured (hc_builds, the build cache's rows) and each
measurement of an allocator on a trace (hc_measurements)."""

from __future__ import annotations

import json
import socket

from hctune.db.connection import now


class Measurements:
    """hctune.db.Database's questions about builds and measurements."""

    def add_build(self, key, setting, library, compiler=None, cflags=None):
        with self.transaction() as c:
            c.execute("INSERT INTO hc_builds (key, setting, library, compiler, cflags, created)"
                      " VALUES (:key, :setting, :library, :compiler, :cflags, :created)"
                      " ON CONFLICT (key) DO UPDATE SET setting = excluded.setting,"
                      " library = excluded.library, compiler = excluded.compiler,"
                      " cflags = excluded.cflags, created = excluded.created",
                      key=key, setting=setting, library=str(library), compiler=compiler,
                      cflags=cflags, created=now())

    def build(self, key):
        return self.query_one("SELECT * FROM hc_builds WHERE key = :key", key=key)

    def add_measurement(self, trace_id, allocator, setting, metric, repeat, result: dict) -> int:
        with self.transaction() as c:
            return c.execute(
                "INSERT INTO hc_measurements (trace_id, allocator, setting, metric, repeat,"
                " result_json, host, created) VALUES (:tid, :allocator, :setting, :metric,"
                " :repeat, :result, :host, :created) RETURNING id",
                tid=trace_id, allocator=allocator, setting=setting, metric=metric, repeat=repeat,
                result=json.dumps(result, sort_keys=True), host=socket.gethostname(),
                created=now()).scalar()

    def measurements(self, trace_id=None, allocator=None, setting=None, metric=None, host=None):
        sql, args = "SELECT * FROM hc_measurements WHERE 1=1", {}
        for col, val in (("trace_id", trace_id), ("allocator", allocator),
                         ("setting", setting), ("metric", metric), ("host", host)):
            if val is not None:
                sql += f" AND {col} = :{col}"
                args[col] = val
        return self.query(sql + " ORDER BY id", **args)
