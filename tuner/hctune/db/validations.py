"""The validations: real runs of the program under the best settings (hc_validations, one
row a validation; hc_real_runs, one row a run)."""

from __future__ import annotations

import json
import socket

from hctune.db.connection import now


class Validations:
    """hctune.db.Database's questions about validations and their runs."""

    def add_validation(self, study, objective, argv, cwd, stdin_path, runs) -> int:
        with self.transaction() as c:
            return c.execute(
                "INSERT INTO hc_validations (study, objective, argv_json, cwd, stdin_path, runs,"
                " status, host, created) VALUES (:study, :objective, :argv, :cwd, :stdin, :runs,"
                " 'running', :host, :created) RETURNING id",
                study=study, objective=objective, argv=json.dumps(list(argv)), cwd=str(cwd),
                stdin=stdin_path, runs=runs, host=socket.gethostname(), created=now()).scalar()

    _REAL_RUN_COLS = ("candidate", "allocator", "setting", "trial", "round", "wall_s", "user_s",
                      "sys_s", "peak_rss_bytes", "exit_status", "stdout_sha256", "problem",
                      "rss_mean_bytes", "rss_final_bytes", "rss_samples")

    def add_real_run(self, validation_id, run: dict) -> int:
        cols = self._REAL_RUN_COLS
        with self.transaction() as c:
            return c.execute(
                f"INSERT INTO hc_real_runs (validation_id, {', '.join(cols)}, created)"
                f" VALUES (:validation_id, {', '.join(':' + k for k in cols)}, :created)"
                " RETURNING id",
                validation_id=validation_id, created=now(),
                **{k: run.get(k) for k in cols}).scalar()

    def finish_validation(self, validation_id, status, summary: dict | None = None):
        s = summary or {}
        w = s.get("winner") or {}
        with self.transaction() as c:
            c.execute("UPDATE hc_validations SET status = :status, winner = :winner,"
                      " winner_setting = :setting, verdict = :verdict, summary_json = :summary,"
                      " finished = :finished WHERE id = :id",
                      status=status, winner=w.get("candidate"), setting=w.get("setting"),
                      verdict=s.get("verdict"),
                      summary=json.dumps(summary, sort_keys=True) if summary else None,
                      finished=now(), id=validation_id)

    def validation(self, validation_id):
        return self.query_one("SELECT * FROM hc_validations WHERE id = :id", id=validation_id)

    def latest_validation(self, study: str | None = None, done: bool = True):
        sql, args = "SELECT * FROM hc_validations WHERE 1=1", {}
        if study is not None:
            sql += " AND study = :study"
            args["study"] = study
        if done:
            sql += " AND status = 'done'"
        return self.query_one(sql + " ORDER BY id DESC LIMIT 1", **args)

    def real_runs(self, validation_id):
        return self.query("SELECT * FROM hc_real_runs WHERE validation_id = :id ORDER BY id",
                          id=validation_id)
