"""The candidates: the study's best K distinct settings by its objective (pareto: K points
spread along the front), generic HC, glibc and the installed reference allocators, each HC
one built through the build cache."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from hctune import allocator_knobs as _xknobs
from hctune import allocators
from hctune import knobs as _knobs
from hctune.db import Database
from hctune.errors import HctuneError
from hctune.search import options as _options

DEFAULT_TOP = _options.VALIDATE_TOP       # said once, with a study's other options
REFERENCES = ("jemalloc", "mimalloc", "tcmalloc")


@dataclasses.dataclass
class Candidate:
    label: str                   # "tuned #1", "hc generic", "glibc", "jemalloc", ...
    kind: str                    # tuned | generic | reference | extra
    allocator: str               # hc | glibc | jemalloc | ... | a library path
    library: Path | None = None  # what LD_PRELOAD gets (None: glibc)
    setting: dict | None = None  # HC only
    trial: int | None = None     # tuned only: the study's trial
    replay: dict | None = None   # the replay's prediction: {"mem_ratio", "perf_ratio"} vs glibc
    env: dict | None = None      # extra environment (tests' broken allocators)
    origin: dict | None = None   # from another study: {"study", "objective", "trial"}

    @property
    def is_hc(self) -> bool:
        """A setting built into a library before it runs (HC's, through the build cache)."""
        return allocators.of(self.allocator).compiled and self.kind in ("tuned", "generic")


def _distinct(trials, top: int, generic_key: str) -> list:
    seen, out = {generic_key}, []
    for t in trials:
        k = t.user_attrs.get("setting")
        if k and k not in seen:
            seen.add(k)
            out.append(t)
        if len(out) >= top:
            break
    return out


def _spread(front: list, k: int) -> list:
    """k points spread evenly along the front (sorted by memory), ends included."""
    if len(front) <= k:
        return list(front)
    if k == 1:
        return [front[len(front) // 2]]
    idx = sorted({round(i * (len(front) - 1) / (k - 1)) for i in range(k)})
    return [front[i] for i in idx]


def tuned_trials(st, objective: str, top: int) -> list:
    """The study's best `top` distinct settings other than generic: by its objective, or for
    pareto spread along the front (lowest memory first)."""
    from hctune.search import space  # deferred: hctune.search loads Optuna (~1 s); emit and report
    from hctune.search import study as _study  # import this package and may not need it
    generic_key = _knobs.key(space.for_search(_knobs.preset("generic")))
    # HC's trials (a cross-allocator study's others: allocator_candidates)
    ok = [t for t in _study.finished(st) if _study.feasible(t)
          and allocators.of(_study.trial_allocator(t)).validates_top]
    if objective == "pareto":
        front = [t for t in _study.pareto_front(st) if t.user_attrs.get("setting") != generic_key
                 and allocators.of(_study.trial_allocator(t)).validates_top]
        return _spread(_distinct(front, len(front), generic_key), top)
    ok.sort(key=lambda t: (t.user_attrs[objective], t.number))
    return _distinct(ok, top, generic_key)


OTHER_OBJECTIVE = {"mem": "perf", "perf": "mem"}


def _other_study_best(db: Database, study_row, have: set, notes: list) -> Candidate | None:
    """The best setting of the latest study of the other objective (mem <-> perf) on the same
    traces, when there is one and it is not already a candidate: its real numbers show when
    the other study's answer dominates this one's (as small and faster, say)."""
    from hctune.search import study as _study  # deferred: Optuna (see tuned_trials)
    other = OTHER_OBJECTIVE.get(study_row["objective"])
    if other is None:
        return None
    row = db.latest_study(other, json.loads(study_row["trace_ids"]))
    if row is None:
        return None
    try:
        _, st = _study.load(db, row["name"])
    except HctuneError as e:
        notes.append(f"the {other} study {row['name']} left out: {e}")
        return None
    t = _study.best_per_allocator(st, other).get("hc")   # its best HC setting
    if t is None or t.user_attrs.get("setting") in have:
        return None
    setting = _study.trial_setting(t)
    if _knobs.key(setting) in have:
        return None
    return Candidate(f"{other} best", "tuned", "hc", setting=setting,
                     replay={"mem_ratio": t.user_attrs["mem"], "perf_ratio": t.user_attrs["perf"]},
                     origin={"study": row["name"], "objective": other, "trial": t.number})


def candidates(db: Database, study_row, st, top: int = DEFAULT_TOP, references: bool = True,
               extra=(), progress=None) -> tuple[list[Candidate], list[str]]:
    """(candidates, notes): built and ready to run; notes say what was left out and why."""
    from hctune.search import space  # deferred: Optuna (see tuned_trials)
    from hctune.search import study as _study  # deferred: Optuna (see tuned_trials)
    notes = []
    objective = study_row["objective"]
    generic = space.for_search(_knobs.preset("generic"))
    generic_key = _knobs.key(generic)
    done = _study.finished(st)
    if not done:
        raise HctuneError(f"study {study_row['name']} has no finished trial; run `hctune search`")
    gen_trial = next((t for t in done if t.user_attrs.get("setting") == generic_key), None)
    out = []
    for i, t in enumerate(tuned_trials(st, objective, top), 1):
        out.append(Candidate(f"tuned #{i}", "tuned", "hc", setting=_study.trial_setting(t),
                             trial=t.number, replay={"mem_ratio": t.user_attrs["mem"],
                                                     "perf_ratio": t.user_attrs["perf"]}))
    if not out:
        if not all(allocators.of(_study.trial_allocator(t)).validates_top for t in done):
            # a study across allocators: its best can be another allocator's; say HC's
            notes.append("HC's best in the study (for pareto: HC's part of the front) is the "
                         "generic setting: there is no other tuned HC setting to run")
        else:
            notes.append("the study's best (for pareto: its whole front) is the generic "
                         "setting: there is no other tuned setting to run")
    out.append(Candidate("hc generic", "generic", "hc", setting=generic,
                         trial=gen_trial.number if gen_trial else None,
                         replay={"mem_ratio": gen_trial.user_attrs["mem"],
                                 "perf_ratio": gen_trial.user_attrs["perf"]} if gen_trial else None))
    other = _other_study_best(db, study_row, {_knobs.key(c.setting) for c in out}, notes)
    if other is not None:
        out.append(other)
    out.append(Candidate("glibc", "reference", "glibc", replay={"mem_ratio": 1.0,
                                                                "perf_ratio": 1.0}))
    time_limited = json.loads(study_row["options_json"] or "{}").get("max_slowdown") is not None
    out += allocator_candidates(st, objective, notes, time_limited)
    out += blind_candidates(st, objective, generic, out, notes)
    if references:
        for name in REFERENCES:
            try:
                out.append(Candidate(name, "reference", name,
                                     library=allocators.resolve(name).library))
            except HctuneError as e:
                notes.append(f"{name} left out: {e}")
    for item in extra:
        label, lib, env = (tuple(item) + (None,))[:3]
        lib = Path(lib).expanduser().resolve()
        if not lib.is_file():
            raise HctuneError(f"allocator library {lib} does not exist")
        out.append(Candidate(label, "extra", str(lib), library=lib, env=env))
    for c in out:
        if c.is_hc:
            if progress:
                progress({"event": "build", "candidate": c.label})
            c.library = allocators.resolve("hc", c.setting, db=db).library
    return out, notes


def allocator_candidates(st, objective: str, notes: list,
                         time_limited: bool = False) -> list[Candidate]:
    """A cross-allocator study's (search --allocators) best setting of every other allocator
    than HC, each run with its library and the variables that carry the setting (kind tuned,
    allocator jemalloc, ...); an allocator whose best is its defaults is left to the
    references. None for an HC-only study. With `time_limited` (a mem study with
    --max-slowdown, whose time limit is always the last constraint) also each allocator's
    smallest setting that only the replay's time limit kept out, when it is smaller than its
    best within the limit: the replay, a loop of allocator calls, overstates what purging
    costs a program (sqlite3 through a session: 1.6-2.2x glibc's time in the replay, 1.0-1.4x
    in real runs), and validation's real runs judge the same limit (over_time_limit)."""
    from hctune.search import study as _study  # deferred: Optuna (see tuned_trials)
    out = []
    objectives = ("mem", "perf") if objective == "pareto" else (objective,)
    seen = set()
    for o in objectives:
        for alloc, t in _study.best_per_allocator(st, o).items():
            if allocators.of(alloc).validates_top or (alloc, t.user_attrs.get("setting")) in seen:
                continue
            seen.add((alloc, t.user_attrs.get("setting")))
            setting = _study.trial_setting(t)
            if not setting:
                continue       # its defaults: the reference candidate already runs it
            try:
                a = allocators.resolve(alloc, setting)
            except HctuneError as e:
                notes.append(f"{alloc}'s best setting left out: {e}")
                continue
            label = f"{alloc} tuned" + (f" ({o})" if len(objectives) > 1 else "")
            out.append(Candidate(label, "tuned", alloc, library=a.library, setting=setting,
                                 trial=t.number, env=dict(a.variables),
                                 replay={"mem_ratio": t.user_attrs["mem"],
                                         "perf_ratio": t.user_attrs["perf"]}))
    if time_limited and objective == "mem":
        within = _study.best_per_allocator(st, "mem")
        over = {}
        for t in sorted(_study.finished(st), key=lambda t: (t.user_attrs["mem"], t.number)):
            cons = t.user_attrs.get("constraints") or []
            if cons and cons[-1] > 0 and all(c <= 0 for c in cons[:-1]):
                over.setdefault(_study.trial_allocator(t), t)
        for alloc, t in over.items():
            best = within.get(alloc)
            setting = _study.trial_setting(t)
            if allocators.of(alloc).validates_top or not setting or \
                    (best is not None and best.user_attrs["mem"] <= t.user_attrs["mem"]):
                continue
            try:
                a = allocators.resolve(alloc, setting)
            except HctuneError as e:
                notes.append(f"{alloc}'s best setting over the replay's time limit left out: {e}")
                continue
            out.append(Candidate(f"{alloc} tuned, over the replay's time limit", "tuned", alloc,
                                 library=a.library, setting=setting, trial=t.number,
                                 env=dict(a.variables),
                                 replay={"mem_ratio": t.user_attrs["mem"],
                                         "perf_ratio": t.user_attrs["perf"]}))
    return out


def blind_candidates(st, objective: str, generic: dict, have: list,
                     notes: list) -> list[Candidate]:
    """The settings whose effect the replay cannot see, so a study's best would reach them only
    by chance, run by validation itself for `objective`: generic HC with each fixed knob that
    declares `validate` (configs/knobs.toml: HUGEPAGE=1) and each seed of the study's other
    allocators declared `validate = true` (configs/allocators.toml: the huge_pages seeds). Kind
    tuned; one already among `have` (same allocator and setting) is not added twice. Only for
    a study across allocators (search --allocators), as the seeds are: an HC-only study's
    validation runs what it ran before."""
    from hctune.search import study as _study  # deferred: Optuna (see tuned_trials)
    names = {a for a in (_study.trial_allocator(t) for t in _study.finished(st))
             if not allocators.of(a).validates_top}
    if not names:
        return []
    seen = {(c.allocator, allocators.setting_key(c.allocator, c.setting or None)) for c in have}
    out = []
    for name, value in _knobs.validated(objective):
        setting = dict(generic, **{name: value})
        if ("hc", _knobs.key(setting)) not in seen:
            seen.add(("hc", _knobs.key(setting)))
            out.append(Candidate(f"hc generic, {name}={value}", "tuned", "hc", setting=setting))
    for alloc in sorted(names):
        for sname, setting in _xknobs.validated_seeds(alloc, objective):
            try:
                if (alloc, allocators.setting_key(alloc, setting)) in seen:
                    continue
                a = allocators.resolve(alloc, setting)
            except HctuneError as e:
                notes.append(f"{alloc}'s {sname} seed left out: {e}")
                continue
            seen.add((alloc, allocators.setting_key(alloc, setting)))
            out.append(Candidate(f"{alloc} {sname}", "tuned", alloc, library=a.library,
                                 setting=setting, env=dict(a.variables)))
    return out
