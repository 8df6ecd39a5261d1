"""A study's answer, decided in one place: the replay's best trial, replaced by the real runs'
winner once the study is validated, replaced by the validation's recommendation over every
candidate when the caller can use any allocator (`emit --env`, the verdict). A winner that came
from another study (the other objective's best, `origin`) is that study's trial, never this
study's trial of the same number. `hctune best`, `emit`, `report` and the service all ask
`decide`, so they name the same answer.
"""

from __future__ import annotations

import dataclasses
import json

from hctune import allocators, realruns
from hctune.db import Database
from hctune.errors import HctuneError, NotFound
from hctune.search import objective as _obj
from hctune.search import study as _study


def study_traces(db: Database, row) -> list[_obj.Trace]:
    out = []
    for tid in json.loads(row["trace_ids"]):
        t = db.trace(tid)
        if t is None:
            raise HctuneError(f"study {row['name']}: trace {tid} is not in the database")
        out.append(_obj.Trace.from_row(t))
    return out


def study_for(db: Database, objective: str):
    """The study `--objective X` without `--study` means: the latest study of objective X on the
    latest study's traces, else a pareto study on them (its best for X)."""
    latest = db.latest_study()
    if latest is None:
        return None
    ids = json.loads(latest["trace_ids"])
    row = db.latest_study(objective, ids) or db.latest_study("pareto", ids)
    if row is None:
        raise HctuneError(f"no {objective} study of the latest traces ({', '.join(f'#{i}' for i in ids)}); "
                          f"run `hctune search --objective {objective}` or name one with --study")
    return row["name"]


def chosen(db: Database, name: str | None, objective: str | None):
    """(study row, optuna study, objective, trial) for `hctune best/emit --study --objective`:
    the replay's best trial."""
    if name is None and objective is not None:
        name = study_for(db, objective)
    row, st = _study.load(db, name)
    objective = objective or ("mem" if row["objective"] == "pareto" else row["objective"])
    if objective not in ("mem", "perf"):
        raise HctuneError(f"--objective must be mem or perf, not {objective!r}")
    trial = _study.choose(st, objective)
    if trial is None:
        raise HctuneError(f"study {row['name']} has no finished trial"
                          + (" within its limits" if _study.finished(st) else "")
                          + "; run `hctune search` (again)")
    return row, st, objective, trial


@dataclasses.dataclass
class Choice:
    """One answer: an allocator, its setting (HC's complete, another's changed knobs), the
    trial that measured it (in its own study: `origin`'s when it came from another), and the
    validation's entry that chose it (None: the replay chose)."""
    allocator: str
    setting: dict
    trial: object | None = None        # an Optuna FrozenTrial
    origin: dict | None = None         # {"study", "objective", "trial"}: another study's trial
    entry: dict | None = None          # the validation's winner or recommendation
    as_it_comes: bool = False          # an allocator with its library defaults, not a trial
    seed_trial: object | None = None   # as_it_comes: the study's trial of its defaults

    @property
    def number(self) -> int | None:
        """The trial's number in its own study (origin's for another study's trial)."""
        if self.origin:
            return self.origin["trial"]
        return self.trial.number if self.trial is not None else None

    @property
    def seed(self) -> str | None:
        return self.trial.user_attrs.get("seed") if self.trial is not None else None

    def label(self) -> str:
        """How the answer is named: "glibc tuned (trial 5)", "trial 3", "the perf study X's
        trial 2", "generic HC" - the candidate's name when real runs chose it."""
        if self.entry is not None:
            cand = self.entry["candidate"]
            if self.origin:
                return (f"{cand} (the {self.origin['objective']} study {self.origin['study']}'s "
                        f"trial {self.origin['trial']})")
            return cand + (f" (trial {self.number})" if self.number is not None else "")
        if self.trial is not None:
            who = f"trial {self.trial.number}"
            return allocators.of(self.allocator).trial_label(self.setting, who)
        return allocators.of(self.allocator).default_label


@dataclasses.dataclass
class Answer:
    """A study's answer at each level: the replay's best, the real runs' HC winner (what
    malloc.c holds) and the recommendation over every candidate (what the verdict says)."""
    row: object
    study: object                     # the Optuna study
    objective: str                    # mem | perf (or the study's own, for an asked trial)
    metric: str                       # time | instructions
    replay_best: object | None        # the replay's best trial of this study
    validation: dict | None           # the validation's summary, when it answers this objective
    winner: Choice                    # what `best`'s table and malloc.c hold
    recommendation: Choice | None     # the verdict's answer (None: not validated)
    asked_trial: int | None = None

    @property
    def answer(self) -> Choice:
        """The one answer a first line names: the recommendation once validated, else the
        winner (the replay's best)."""
        return self.recommendation or self.winner

    def choice(self, any_allocator: bool) -> Choice:
        return self.answer if any_allocator else self.winner

    @property
    def chosen_by(self) -> str:
        return "trial" if self.asked_trial is not None else \
            "real runs" if self.validation is not None else "replay"


def _trial_of(st, n):
    return next((t for t in _study.finished(st) if t.number == n), None) if n is not None \
        else None


def _origin_trial(db: Database, origin: dict):
    """The trial `origin` names, in its own study (None when that study is gone)."""
    try:
        _, ost = _study.load(db, origin["study"])
    except HctuneError:
        return None
    return _trial_of(ost, origin["trial"])


def _from_entry(db: Database, st, entry: dict, alloc: str, setting: dict) -> Choice:
    """The Choice a validation's entry (winner or recommendation) names: its trial in its own
    study; an allocator as it comes with its defaults' trial in this study."""
    origin = entry.get("origin")
    n = entry.get("trial")
    if origin:
        trial = _origin_trial(db, origin)
    else:
        trial = _trial_of(st, n)
    seed = allocators.of(alloc).defaults_seed     # None: HC, whose "as it comes" is generic
    as_it_comes = seed is not None and trial is None and not origin
    seed_t = next((t for t in _study.finished(st) if _study.trial_allocator(t) == alloc
                   and t.user_attrs.get("seed") == seed), None) \
        if as_it_comes else None
    return Choice(alloc, setting, trial, origin, entry, as_it_comes, seed_t)


def decide(db: Database, name: str | None = None, objective: str | None = None,
           trial: int | None = None) -> Answer:
    """The study `name`'s answer for `objective` (see the module's text); `trial`: that one
    finished trial of it, asked for (no validation replaces it)."""
    asked = objective
    if trial is not None:
        row, st = _study.load(db, name)
        objective = objective or row["objective"]
        t = _trial_of(st, trial)
        if t is None:
            raise NotFound(f"study {row['name']} has no finished trial {trial}")
        best_t, real = None, None
    else:
        row, st, objective, t = chosen(db, name, objective)
        best_t = t
        real = realruns.validated(db, row, asked)
    metric = json.loads(row["options_json"] or "{}").get("metric", "time")
    winner = Choice(_study.trial_allocator(t), _study.trial_setting(t), t)
    rec = None
    if real is not None:
        winner, rec = validated_choices(db, st, real)
    return Answer(row, st, objective, metric, best_t, real, winner, rec, trial)


def validated_choices(db: Database, st, real: dict) -> tuple[Choice, Choice]:
    """(HC winner, recommendation) of a validation's summary `real` of the study `st`."""
    w = real["winner"]
    winner = _from_entry(db, st, w, w.get("allocator") or "hc", realruns.winner_setting(real))
    alloc, setting, entry = realruns.recommendation_setting(real)
    return winner, _from_entry(db, st, entry, alloc, setting)


def complete(alloc: str, setting: dict, sets=()) -> dict:
    """`setting` with `--set` applied last, completed once for its allocator."""
    fam = allocators.family(alloc)
    return fam.complete({**setting, **fam.parse(list(sets or ()))})
