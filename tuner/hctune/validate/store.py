"""Reading stored validations back: the latest summary, the winner that `best`, `emit` and
`report` use, and the provenance text of the emitted malloc.c."""

from __future__ import annotations

import json

from hctune import knobs as _knobs
from hctune.db import Database


def latest(db_path_or_db, study: str | None = None) -> dict | None:
    """The summary of the latest finished validation (of `study` when given), or None."""
    def read(db):
        row = db.latest_validation(study)
        return json.loads(row["summary_json"]) if row and row["summary_json"] else None
    if isinstance(db_path_or_db, Database):
        return read(db_path_or_db)
    with Database(db_path_or_db) as db:
        return read(db)


def winner_entry(summary: dict) -> dict | None:
    w = (summary or {}).get("winner")
    if not w:
        return None
    return next(e for e in summary["candidates"] if e["candidate"] == w["candidate"])


def _fmt_measure(m, v):
    if v is None:
        return "-"
    return f"{v / 1024:,.0f} KiB" if m == "peak_rss_bytes" else f"{v:.3f} s"


def provenance(summary: dict) -> dict:
    """The real-run evidence for the emitted malloc.c's header."""
    w = winner_entry(summary)
    prog = summary["program"]
    out = {"validated": f"{summary['runs']} interleaved real runs per candidate on "
                        f"{summary['date']} (validation #{summary['validation_id']}), output "
                        f"checked: {summary['output_check']}",
           "program": " ".join(prog["argv"]) + (f" < {prog['stdin']}" if prog["stdin"] else "")
           + f" (in {prog['cwd']})"}
    if w is not None:
        def line(e):
            parts = [f"{m} {_fmt_measure(m, e['median'][m])} (CI "
                     f"{_fmt_measure(m, e['ci'][m][0])}–{_fmt_measure(m, e['ci'][m][1])})"
                     for m in ("wall_s", "peak_rss_bytes")]
            return f"{e['candidate']}: median " + ", ".join(parts)
        out["real runs"] = "; ".join(line(e) for e in summary["candidates"]
                                     if e["candidate"] in (w["candidate"], "hc generic", "glibc"))
        ratios = []
        for key, who in (("vs_generic", "generic HC"), ("vs_glibc", "glibc")):
            for m in ("wall_s", "peak_rss_bytes"):
                r = w[key].get(m)
                if r:
                    ratios.append(f"{m} {r['ratio']:.3f}x {who} (CI {r['ci'][0]:.3f}–"
                                  f"{r['ci'][1]:.3f})")
        out["real ratios"] = "; ".join(ratios) or "-"
    out["verdict"] = summary["verdict"]
    return out


def validated(db: Database, study_row, objective: str | None = None) -> dict | None:
    """The latest finished validation of the study with a winner, when it answers `objective`
    (None, or the study's own objective): what `best`, `emit` and `report` then use."""
    if objective is not None and objective != study_row["objective"]:
        return None
    s = latest(db, study_row["name"])
    return s if s and s.get("winner") else None


def winner_setting(summary: dict) -> dict:
    return _knobs.complete(_knobs.parse_sets(summary["winner"]["setting"].split(",")))
