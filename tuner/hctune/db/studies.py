"""The studies (hc_studies): each Optuna study of hctune, its traces and options."""

from __future__ import annotations

import json

from hctune.db.connection import Row, now


class Studies:
    """hctune.db.Database's questions about studies."""

    def add_study(self, name, objective, trace_ids, storage, options=None):
        with self.transaction() as c:
            c.execute("INSERT INTO hc_studies (name, objective, trace_ids, storage, options_json,"
                      " created) VALUES (:name, :objective, :traces, :storage, :options,"
                      " :created) ON CONFLICT (name) DO NOTHING",
                      name=name, objective=objective, traces=json.dumps(list(trace_ids)),
                      storage=storage, options=json.dumps(options or {}, sort_keys=True),
                      created=now(precise=True))

    def study(self, name):
        return self.query_one("SELECT * FROM hc_studies WHERE name = :name", name=name)

    def studies(self) -> list[Row]:
        """Every study hc_studies holds, oldest first."""
        return self.query("SELECT * FROM hc_studies ORDER BY created, name")

    def study_names(self) -> list[str]:
        return [r["name"] for r in self.query("SELECT name FROM hc_studies ORDER BY created")]

    def latest_study(self, objective: str | None = None, trace_ids=None):
        """The latest study, or the latest of `objective` (on exactly `trace_ids` when given)."""
        sql, args = "SELECT * FROM hc_studies WHERE 1=1", {}
        if objective is not None:
            sql += " AND objective = :objective"
            args["objective"] = objective
        if trace_ids is not None:
            sql += " AND trace_ids = :traces"
            args["traces"] = json.dumps(list(trace_ids))
        # `created` has microseconds (older rows: seconds, then the row order decides)
        order = "rowid" if self.dialect == "sqlite" else "name"
        return self.query_one(sql + f" ORDER BY created DESC, {order} DESC LIMIT 1", **args)
