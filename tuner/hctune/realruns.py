"""The stored real-run validations read back (hc_validations): the latest summary and its
winner, what `best`, `emit` and `report` use. Below both `hctune.search` (whose `best` prefers
the validated winner) and `hctune.validate` (which writes them), so neither imports the other
back; `hctune.validate` re-exports these names."""

from __future__ import annotations

import json

from hctune import allocators
from hctune.db import Database
from hctune.errors import HctuneError


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


def validated(db: Database, study_row, objective: str | None = None) -> dict | None:
    """The latest finished validation of the study with a winner, when it answers `objective`
    (None, or the study's own objective): what `best`, `emit` and `report` then use."""
    if objective is not None and objective != study_row["objective"]:
        return None
    s = latest(db, study_row["name"])
    return s if s and s.get("winner") else None


def recommendation_setting(summary: dict) -> tuple[str, dict, dict]:
    """(allocator, setting, entry) of the recommendation over every candidate (glibc or
    jemalloc as they come, another allocator's tuned setting, or an HC one): what
    `emit --env` writes. A library given by path has no declared knobs: one line."""
    rec = summary.get("recommendation") or summary["winner"]
    alloc = rec.get("allocator") or "hc"
    fam = allocators.find(alloc)
    if fam is None:
        raise HctuneError(f"the recommendation is {rec['candidate']} ({alloc}): emit --env "
                          f"writes {', '.join(allocators.families())}")
    return alloc, fam.from_key(rec.get("setting")), rec


def winner_setting(summary: dict) -> dict:
    """The winner's setting: HC's full one, or another allocator's changed knobs."""
    return allocators.family(summary["winner"].get("allocator")).from_key(
        summary["winner"]["setting"])
