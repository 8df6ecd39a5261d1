"""Create or resume a study, run it, and read its results back.

A study is one Optuna study (in the storage of `hctune.search.storage`) plus a row in
hc_studies naming its traces, objective and options. `--trials N` is the number of finished
trials the study should hold, so re-running the same command after Ctrl-C or a crash finishes the
job instead of starting over; every finished trial is already in the storage.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import signal
import socket
import threading
import time
import warnings
from pathlib import Path

import optuna
from optuna.trial import TrialState

from hctune import allocator_knobs as _xknobs
from hctune import allocators, replay
from hctune import knobs as _knobs
from hctune.db import Database
from hctune.errors import HctuneError, redact
from hctune.search import fidelity as _fidelity
from hctune.search import fitted as _fit
from hctune.search import objective as _obj
from hctune.search import options as _options
from hctune.search import seeds as _seeds
from hctune.search import space
from hctune.search.storage import default_url, fail_orphans, open_storage, this_worker
from hctune.trace import register

Options = _options.Options   # the one model of a study's options (search/options.py)

# Stop after this many trials fail in a row: the harness or the build is broken, not the setting.
MAX_FAILS_IN_A_ROW = 3


def parse_memory_limit(text) -> tuple[float | None, bool]:
    """--max-memory-overhead's value: (limit, memory_limit_default). None: the default rule;
    "none"/"off": no limit at all; a number: that many percent over glibc."""
    if text is None:
        return None, True
    if isinstance(text, str) and text.strip().lower() in ("none", "off", "no"):
        return None, False
    try:
        return float(text), True
    except (TypeError, ValueError):
        raise HctuneError(f"--max-memory-overhead takes a percentage or 'none', not {text!r}") \
            from None


def apply_defaults(opts: "Options") -> "Options":
    """The documented default: perf keeps peak RSS within +10 % of glibc's (docs/search.md)."""
    if opts.objective == "perf" and opts.max_memory_overhead is None \
            and opts.memory_limit_default:
        opts.max_memory_overhead = _obj.DEFAULT_PERF_MEMORY_OVERHEAD
        opts.memory_vs_generic = True
    return opts


# ---- traces ----



def register_trace(db: Database, path) -> _obj.Trace:
    """A trace file named on the command line: checked, registered (hctune.trace.register)."""
    return _obj.Trace.from_row(register.named(db, path))


def registered_trace(db: Database, trace_id: int) -> _obj.Trace:
    """A trace already in the database, by id, with the path of its file on this machine
    (hctune.trace.store: a shared database's copy when the file is elsewhere)."""
    row = db.trace(trace_id)
    if row is None:
        raise HctuneError(f"trace #{trace_id} is no longer in the database")
    return dataclasses.replace(_obj.Trace.from_row(row), path=str(register.local_path(db, row)))


def resolve_traces(db: Database, paths) -> list[_obj.Trace]:
    """The named traces (files, or ids of registered traces), or the latest one profiled when
    none is named."""
    if paths:
        traces = [registered_trace(db, p) if isinstance(p, int) else register_trace(db, p)
                  for p in paths]
        uniq = {t.id: t for t in traces}
        return list(uniq.values())
    return [registered_trace(db, register.latest(db)["id"])]


# ---- names ----

def default_name(traces, opts: Options) -> str:
    """Same traces + objective + metric + limits -> same name, so the same command resumes."""
    digest = hashlib.sha256(",".join(sorted(t.sha256 for t in traces)).encode()).hexdigest()[:12]
    name = f"{opts.objective}-{opts.metric}-{digest}"
    if opts.max_memory_overhead is not None:
        name += f"-mem{opts.max_memory_overhead:g}" + ("-gen" if opts.memory_vs_generic else "")
    if opts.max_slowdown is not None:
        name += f"-slow{opts.max_slowdown:g}"
    if opts.sampler != "tpe":
        name += f"-{opts.sampler}"
    if opts.only is not None:
        name += "-only-" + "+".join(sorted(opts.only))
    if opts.cross:
        name += "-x-" + "+".join(opts.allocators)
    if opts.memory_measure != "peak":
        name += f"-{opts.memory_measure}"
    return name


# ---- samplers and constraints ----

def _constraints_func(frozen):
    return frozen.user_attrs.get("constraints", [])


def make_sampler(opts: Options, constrained: bool):
    cf = _constraints_func if constrained else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        if opts.sampler == "random":
            return optuna.samplers.RandomSampler(seed=opts.seed)
        if opts.objective == "pareto":
            # NSGA-II keeps the front; a small population so generations turn over within
            # the few dozen trials a search usually gets.
            pop = max(8, min(50, (opts.trials or 50) // 4))
            return optuna.samplers.NSGAIISampler(population_size=pop, seed=opts.seed,
                                                 constraints_func=cf)
        # constant_liar: parallel workers (--jobs, several machines) do not all pick one point.
        # group: the cross-allocator space is conditional (each allocator has its own knobs)
        return optuna.samplers.TPESampler(seed=opts.seed, multivariate=True,
                                          constant_liar=True, constraints_func=cf,
                                          **({"group": True} if opts.cross else {}))


def directions(objective: str):
    return ["minimize", "minimize"] if objective == "pareto" else ["minimize"]


# ---- seeds ----

_ACTIVE = (TrialState.COMPLETE, TrialState.WAITING, TrialState.RUNNING)


def seed_plan(objective: str, names=None, only=None, threads: bool = False,
              fit_tables: dict | None = None) -> list[tuple[str, str, dict, dict]]:
    """(allocator, label, setting, Optuna parameters) of a study's seeds, in the order they
    are queued. Each family says its own (seeds.seeds: HC's generic, §5.2 walk and Table 7
    rows; another's library defaults, then the advice declared for it); they come as: every
    allocator as it comes (HC's generic first: the reference every result is compared to),
    then the study's fitted tables on generic (search/fitted.py: a short search measures
    them), then the others' advice, then the rest of the paper's HC settings (a long walk,
    after the others' few), so a small budget still measures every allocator as it comes.
    names None: HC alone (a study that does not pick its allocator: no "allocator" parameter)."""
    cross = names is not None
    per = []
    for name in (names if cross else (None,)):
        fam = allocators.family(name)
        searched = space.searched(only, threads, name)

        def params(setting, fit=None, name=name, fam=fam):
            p = space.params_of(setting, only, threads, name)
            if fam.fits_tables and fit_tables:
                p[_fit.PARAM] = fit or _fit.NONE
            return {space.ALLOCATOR_PARAM: name, **p} if cross else p
        mine = [(name, label, setting, params(setting))
                for label, setting in _seeds.seeds(objective, name)
                if fam.seedable(setting, searched)]
        fitted = [(name, f"generic + fitted {key}", _fit.apply(mine[0][2], key, fit_tables),
                   params(mine[0][2], key))
                  for key in (fit_tables or {})] if fam.fits_tables and mine else []
        per.append((fam, mine[:1], fitted, mine[1:]))
    return ([s for _, first, _, _ in sorted(per, key=lambda x: not x[0].long_walk) for s in first]
            + [s for _, _, fitted, _ in per for s in fitted]
            + [s for _, _, _, rest in sorted(per, key=lambda x: x[0].long_walk) for s in rest])


def enqueue_seeds(study: optuna.Study, objective: str, only=None, threads: bool = False,
                  limit: int | None = None, fit_tables: dict | None = None,
                  names=None) -> int:
    """Enqueue the study's seeds (seed_plan; `names`: the allocators of a study across
    allocators, None for HC alone) that it has not run or queued yet, at most `limit` of them
    (options.seed_limit: every seed queued runs, and some trials are left to the sampler).
    Failed ones are queued again: a seed interrupted by Ctrl-C still gets measured."""
    cross = names is not None
    have = set()
    for t in study.get_trials(deepcopy=False, states=_ACTIVE):
        if cross:   # a seed of a study across allocators: its allocator and label
            params = t.system_attrs.get("fixed_params") or {}
            if space.ALLOCATOR_PARAM in params:
                have.add((params[space.ALLOCATOR_PARAM], t.user_attrs.get("seed")))
            continue
        # HC alone: its setting. A queued seed carries all its values in fixed_params; a trial
        # another worker is sampling right now may hold only some of its parameters yet: it is
        # not a seed, skip it.
        params = t.system_attrs.get("fixed_params") or t.params
        if params and all(p in params for p in space.distributions(only, threads)):
            setting = space.setting_of(params, only, threads)
            have.add(_knobs.key(_fit.apply(setting, params.get(_fit.PARAM), fit_tables or {})))
    n = 0
    for alloc, label, setting, params in seed_plan(objective, names, only, threads, fit_tables):
        if ((alloc, label) if cross else allocators.family(alloc).key(setting)) in have:
            continue
        if limit is not None and n >= limit:
            break
        study.enqueue_trial(params, user_attrs={"seed": label})
        n += 1
    return n


def check_allocators(names, notice=None) -> tuple[str, ...]:
    """The allocators a cross-allocator search can use: known names, each installed; one not
    installed is left out with one line saying how to add it."""
    out = []
    for a in names:
        if allocators.find(a) is None:
            raise HctuneError(f"--allocators: {a!r} has no declared knobs; use hc or "
                              f"{', '.join(_xknobs.names())}")
        if a in allocators.SYSTEM:
            try:
                allocators.find_system(a)
            except HctuneError as e:
                if notice:
                    notice(f"{a} left out of the search: {e}")
                continue
        if a not in out:
            out.append(a)
    if not out:
        raise HctuneError("--allocators: none of them is installed")
    return tuple(out)


def default_allocators(notice=None) -> tuple[str, ...]:
    """HC plus every allocator with declared knobs whose library is installed (`search`'s
    default); one not installed is left out, with one line to `notice` saying how to add it."""
    return check_allocators(["hc", *_xknobs.names()], notice)


def expand_allocators(names, notice=None) -> tuple[str, ...]:
    """A study's allocators as the search uses them: (options.INSTALLED,) becomes HC and every
    allocator installed on this machine (default_allocators); none: HC alone; others as
    given (check_allocators checks them when the search starts)."""
    names = tuple(names or _options.STORED_ALLOCATORS)
    if _options.INSTALLED in names:
        if len(names) > 1:
            raise HctuneError(f"--allocators: {_options.INSTALLED!r} stands alone (HC and every "
                              "allocator installed)")
        return default_allocators(notice)
    return names


# ---- running ----

def _worker() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


class Interrupt:
    """Ctrl-C, made safe for the storage. While a trial is being measured, SIGINT aborts it at
    once (the trial is marked failed; hctune's own rows are written in single transactions).
    While Optuna is writing to its storage, SIGINT only asks to stop, so no write is cut in
    half; the run then ends as soon as the write is done. Either way `requested` is set and the
    run ends with KeyboardInterrupt (exit 130); the same command resumes."""

    def __init__(self):
        self.requested = False
        self.measuring = False
        self.study = None
        self._old = None

    def _handler(self, signum, frame):
        self.requested = True
        if self.study is not None:
            with contextlib.suppress(RuntimeError):
                self.study.stop()
        if self.measuring:
            raise KeyboardInterrupt

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            self._old = signal.signal(signal.SIGINT, self._handler)
        return self

    def __exit__(self, *exc):
        if self._old is not None:
            signal.signal(signal.SIGINT, self._old)

    @contextlib.contextmanager
    def measurement(self):
        if self.requested:
            raise KeyboardInterrupt
        main = threading.current_thread() is threading.main_thread()
        self.measuring = main
        try:
            yield
        finally:
            if main:
                self.measuring = False


def _requeue_seed(trial: optuna.Trial) -> None:
    """A seed that the deadline kept from being measured goes back to the queue (seeds are
    never lost; the next run measures it)."""
    frozen = trial.study._storage.get_trial(trial._trial_id)
    label = frozen.user_attrs.get("seed")
    fixed = frozen.system_attrs.get("fixed_params")
    if label and fixed:
        trial.study.enqueue_trial(dict(fixed), user_attrs={"seed": label})


# A replay that has already lost ends early (issue 37): its peak RSS past the best finished
# trial's by more than PRUNE_MEM_TOLERANCE (a peak-memory study of one trace), or past the
# study's memory limit (any study with one: it would be infeasible), or its CPU time past
# PRUNE_TIME_FACTOR times the best trial's whole replay (a time study of one trace).
PRUNE_MEM_TOLERANCE = 0.10
PRUNE_TIME_FACTOR = 3.0


def prune_bounds(study: optuna.Study, ev: _obj.Evaluator, opts: Options):
    """bounds(trace) -> {max_rss_bytes, max_cpu_seconds} for the next trial's replays, from the
    study's best finished trial and its limits; None when nothing bounds them. Pareto studies
    are not bounded (a large setting may be on the front for its speed), nor memory in a study
    of the mean or final RSS (the peak is not what it compares)."""
    if opts.objective == "pareto":
        return None
    peak = ev.mem_field in (_obj.MEM_FIELD, _obj.RSS_FIELD)
    best = choose(study, opts.objective) if len(ev.traces) == 1 else None
    row = (best.user_attrs.get("per_trace") or [None])[0] if best is not None else None

    def bounds(trace) -> dict:
        out = {}
        rss = []
        if opts.max_memory_overhead is not None:
            base = ev.baseline(trace).get(_obj.RSS_FIELD) or 0
            ref = ev.reference(trace) if opts.memory_vs_generic else None
            base = max(base, (ref or {}).get(_obj.RSS_FIELD) or 0)
            if base:
                rss.append(base * (1 + opts.max_memory_overhead / 100))
        if row is not None and opts.objective == "mem" and peak and row.get(_obj.RSS_FIELD):
            rss.append(row[_obj.RSS_FIELD] * (1 + PRUNE_MEM_TOLERANCE))
        if rss:
            out["max_rss_bytes"] = int(min(rss)) + 1
        field = _obj.PERF_FIELDS["time"]
        b = ev.baseline(trace)
        if row is not None and opts.objective == "perf" and ev.metric == "time" and \
                row.get(field) and b.get("ops") and b.get("replay_threads", 1) <= 1:
            out["max_cpu_seconds"] = (row[field] * b["ops"] * ev.repeat * PRUNE_TIME_FACTOR
                                      / 1e9)
        return out
    return bounds


class Deadline:
    """--timeout: the moment after which no trial starts, and running ones are asked to end
    (their replay is stopped within about a second: hctune.replay.measure's should_stop).
    `clock` is injected by tests (Options.clock)."""

    def __init__(self, timeout: float | None, clock=time.monotonic):
        self.clock = clock
        self.at = None if timeout is None else clock() + timeout

    def passed(self) -> bool:
        return self.at is not None and self.clock() >= self.at


def make_objective(ev: _obj.Evaluator, opts: Options, interrupt: Interrupt | None = None,
                   deadline: Deadline | None = None, plan: _fidelity.Plan | None = None):
    interrupt = interrupt or Interrupt()
    deadline = deadline or Deadline(None)
    plan = plan or _fidelity.whole()

    def on_part(trial: optuna.Trial, setting: dict, alloc: str) -> None:
        """The setting on the part of the traces first; successive halving says whether it goes
        on to the whole (a seed always does). A setting measured whole before skips it."""
        if all(ev.stored(t, alloc, setting) is not None for t in ev.traces):
            return
        e = ev.evaluate(setting, alloc, should_stop=deadline.passed, parts=plan.parts)
        v = e.value(opts.objective)
        trial.set_user_attr("part_value", v)
        trial.report(v, step=_fidelity.PART_STEP)
        if "seed" not in trial.user_attrs and trial.should_prune():
            trial.set_user_attr(FIDELITY, "part")
            trial.set_user_attr(PRUNED_BY, f"on {plan.what}: {v:.4f}x glibc, not among the "
                                           f"best 1/{_fidelity.REDUCTION} there")
            raise optuna.TrialPruned()

    def objective(trial: optuna.Trial):
        if opts.trials is not None and holds_its_trials(trial.study, opts.trials, trial.number):
            # another worker (or --jobs thread) is measuring the last trials the study needs:
            # this one would take it past its count
            trial.set_user_attr(SKIPPED, HELD)
            raise optuna.TrialPruned()
        if deadline.passed():
            # --timeout: nothing starts after the deadline (a seed taken from the queue goes
            # back to it, for the run that resumes the study)
            _requeue_seed(trial)
            trial.set_user_attr(SKIPPED, "the deadline passed")
            raise optuna.TrialPruned()
        with warnings.catch_warnings():
            # Seeds use the paper's QL_HIGH values (72, 264), off the search grid on purpose.
            warnings.filterwarnings("ignore", message="Fixed parameter")
            if opts.cross:
                alloc, setting = space.suggest_allocator(trial, opts.allocators, opts.only,
                                                         opts.threads)
            else:
                alloc, setting = "hc", space.suggest(trial, opts.only, opts.threads)
            if opts.fit_tables and allocators.of(alloc).fits_tables:
                key = trial.suggest_categorical(_fit.PARAM, _fit.choices(opts.fit_tables))
                setting = _fit.apply(setting, key, opts.fit_tables)
        if opts.cross:
            trial.set_user_attr("allocator", alloc)
        trial.set_user_attr("setting", allocators.setting_key(alloc, setting) or "")
        trial.set_user_attr("worker", _worker())
        if opts.on_trial is not None:
            opts.on_trial(trial.number)
        # seeds are the references (generic, the paper's settings, each allocator as it
        # comes): always measured whole, never cut short
        bounds = None if "seed" in trial.user_attrs else prune_bounds(trial.study, ev, opts)
        try:
            with interrupt.measurement():
                if plan.parts:
                    on_part(trial, setting, alloc)
                e = ev.evaluate(setting, alloc, should_stop=deadline.passed, bounds=bounds)
                trial.set_user_attr(FIDELITY, "whole")
        except replay.ReplayStopped:
            _requeue_seed(trial)
            trial.set_user_attr(STOPPED, "the --timeout deadline")
            raise optuna.TrialPruned() from None
        except replay.ReplayPruned as lost:
            # it has lost already (passed the bound the best trial set): never the best
            trial.set_user_attr(PRUNED_BY, str(lost).splitlines()[0])
            raise optuna.TrialPruned() from None
        except Exception as err:
            if interrupt.requested:  # the replay died of the same Ctrl-C
                raise KeyboardInterrupt from None
            trial.set_user_attr("error", str(err).splitlines()[0] if str(err) else repr(err))
            raise
        trial.set_user_attr("mem", e.mem)
        trial.set_user_attr("perf", e.perf)
        trial.set_user_attr("per_trace", e.per_trace)
        trial.set_user_attr("cached", e.cached)
        trial.set_user_attr("constraints", _obj.constraints(e, opts.max_memory_overhead,
                                                             opts.max_slowdown,
                                                             opts.memory_vs_generic))
        return e.value(opts.objective)
    return objective


SKIPPED = "skipped"   # user attribute of a trial pruned because the study held its trials


def _evaluated(t) -> bool:
    """A trial that counts toward --trials: finished, or pruned once it had lost (on its part
    of the trace, or past a bound); not one skipped, nor one stopped at the deadline (the study
    measures it again when resumed)."""
    return t.state == TrialState.COMPLETE or (
        t.state == TrialState.PRUNED and SKIPPED not in t.user_attrs
        and STOPPED not in t.user_attrs)


def holds_its_trials(study: optuna.Study, target: int, but: int | None = None) -> bool:
    """Whether the study's evaluated trials and those running (other than trial `but`) make
    `target`: a new trial would take it past its count."""
    ts = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.RUNNING,
                                                  TrialState.PRUNED))
    return sum(1 for t in ts if t.number != but and
               (t.state == TrialState.RUNNING or _evaluated(t))) >= target


HELD = "the study holds its trials"   # SKIPPED's reason when other workers had the last ones


def _held_skips(study: optuna.Study) -> int:
    """The trials skipped because others were measuring the study's last trials."""
    return sum(1 for t in study.get_trials(deepcopy=False, states=(TrialState.PRUNED,))
               if t.user_attrs.get(SKIPPED) == HELD)


def _wait_for_others(study: optuna.Study, target: int) -> bool:
    """After this run stopped short of `target` because others (processes, machines) are
    measuring the last trials: wait for them. True when the study still lacks trials once they
    are done (one failed: run again); False when it holds them, or when nobody was running
    (this run stopped for its own reasons: failures in a row)."""
    waited = False
    while count_finished(study) < target and holds_its_trials(study, target):
        waited = True
        fail_orphans(study._storage, study._study_id)   # one of them on this machine died
        time.sleep(1.0)
    return waited and count_finished(study) < target


def count_finished(study: optuna.Study) -> int:
    """The trials that count toward --trials: finished, or pruned as lost (_evaluated)."""
    return sum(1 for t in study.get_trials(deepcopy=False,
                                           states=(TrialState.COMPLETE, TrialState.PRUNED))
               if _evaluated(t))


def open_study(db: Database, name: str, storage_url: str, opts: Options | None = None,
               create: bool = False) -> optuna.Study:
    storage = open_storage(storage_url, owner=this_worker() if create else None)
    sampler = make_sampler(opts, constrained=bool(
        opts.max_memory_overhead is not None or opts.max_slowdown is not None)) if opts else None
    # multi-fidelity trials report their part's value (search/fidelity.py); a study that never
    # does is not pruned by it
    pruner = _fidelity.pruner() if opts and opts.objective != "pareto" else None
    if create:
        return optuna.create_study(study_name=name, storage=storage, sampler=sampler,
                                   pruner=pruner, directions=directions(opts.objective),
                                   load_if_exists=True)
    try:
        return optuna.load_study(study_name=name, storage=storage, sampler=sampler,
                                 pruner=pruner)
    except KeyError:
        raise HctuneError(f"study {name!r} is not in storage {redact(storage_url)}") from None


def run(db_path, trace_paths=(), opts: Options | None = None, progress=None,
        measure_fn=None, notice=None) -> dict:
    """`hctune search`: create or resume the study and run it until it holds `opts.trials`
    finished trials or `opts.timeout` seconds pass. `progress(study, done, target, started,
    failed)` is called after every trial (`failed`: None or (trial number, one-line error)) (the CLI draws its bar with it); `measure_fn` replaces
    hctune.replay.measure (unit tests); `notice(line)` hears about trials of killed runs that were
    marked failed. Returns `summary(...)`."""
    opts = opts or Options()
    # --timeout counts from here: the baselines and the study's set-up are inside it
    deadline = Deadline(opts.timeout, opts.clock)
    _obj.check_choice(opts.objective, opts.metric)
    if opts.trials is not None and opts.trials < 1:
        raise HctuneError("--trials must be at least 1")
    if opts.jobs < 1:
        raise HctuneError("--jobs must be at least 1")
    for what, v in (("--max-memory-overhead", opts.max_memory_overhead),
                    ("--max-slowdown", opts.max_slowdown)):
        if v is not None and v < 0:
            raise HctuneError(f"{what} is a percentage over glibc and cannot be negative")
    if opts.trials is None and opts.timeout is None:
        opts.trials = _options.DEFAULT_TRIALS
    _options.check(opts)
    if opts.memory_measure not in _obj.MEMORY_MEASURES:
        raise HctuneError(f"--memory-measure {opts.memory_measure!r}: the replay measures "
                          f"{' or '.join(_obj.MEMORY_MEASURES)}"
                          + ("; the time-weighted mean needs the RSS curve of real runs"
                             if opts.memory_measure == "mean" else ""))
    opts.allocators = expand_allocators(opts.allocators, notice)
    if opts.cross:
        opts.allocators = check_allocators(opts.allocators, notice)
    apply_defaults(opts)
    # Failed trials are reported through `progress` in one line, not as Optuna's tracebacks.
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    with Database(db_path) as db:
        traces = resolve_traces(db, trace_paths)
        name = opts.study or default_name(traces, opts)
        url = opts.storage or default_url(db_path)
        old = db.study(name)
        if old is not None and (old["objective"] != opts.objective
                                or json.loads(old["trace_ids"]) != [t.id for t in traces]):
            raise HctuneError(f"study {name!r} exists with objective {old['objective']} on traces "
                              f"{old['trace_ids']}; choose another --study name")
        study = open_study(db, name, url, opts, create=True)
        stored_obj = study.user_attrs.get("objective")
        if stored_obj is not None and stored_obj != opts.objective:
            raise HctuneError(f"study {name!r} in the storage optimises {stored_obj}, "
                              f"not {opts.objective}; choose another --study name")
        if stored_obj is None:
            study.set_user_attr("objective", opts.objective)
            study.set_user_attr("metric", opts.metric)
            study.set_user_attr("traces", [t.sha256 for t in traces])
        # A run killed outright (SIGKILL, OOM killer) left its trial RUNNING: fail it, say so.
        orphans = fail_orphans(study._storage, study._study_id)
        if orphans and notice:
            notice(f"marked {len(orphans)} trial(s) of a killed run as failed: "
                   + ", ".join(f"#{n}" for n in orphans))
        db.add_study(name, opts.objective, [t.id for t in traces], redact(url),
                     {"metric": opts.metric, "max_memory_overhead": opts.max_memory_overhead,
                      "max_slowdown": opts.max_slowdown, "repeat": opts.repeat,
                      "sampler": opts.sampler,
                      "memory_limit_default": opts.memory_limit_default,
                      "memory_vs_generic": opts.memory_vs_generic,
                      **({"allocators": list(opts.allocators)} if opts.cross else {}),
                      **({"memory_measure": opts.memory_measure}
                         if opts.memory_measure != "peak" else {})})
    repeat, until = measure_repeats(opts)
    stop_ahead = threading.Event()     # the builds compiled ahead (compile_ahead)
    ev = _obj.Evaluator(db_path, traces, metric=opts.metric, repeat=repeat,
                        until_spread=until, measure_fn=measure_fn, mem_field=opts.mem_field(),
                        footprint_build=opts.footprint_build(),
                        reference_setting=space.for_search(_knobs.preset("generic"))
                        if opts.memory_vs_generic else None)
    try:
        for t in traces:  # glibc first: a broken harness fails here, once, with a clear message
            ev.baseline(t)
        opts.threads = study_threads(study, [ev.baseline(t) for t in traces])
        if notice:
            for line in memory_warnings(ev, traces, opts):
                notice(line)
        if opts.only is not None:
            space.searched(opts.only, opts.threads)  # a thread knob on one thread: clear error
        if any(allocators.of(a).fits_tables for a in opts.allocators):
            opts.fit_tables = _fit.study_tables(study, [t.path for t in traces], notice)
        if opts.seeds and opts.sampler == "tpe":
            waiting = len(study.get_trials(deepcopy=False, states=(TrialState.WAITING,)))
            limit = _options.seed_limit(opts, count_finished(study))
            limit = None if limit is None else max(0, limit - waiting)
            enqueue_seeds(study, opts.objective, opts.only, opts.threads, limit,
                          opts.fit_tables, opts.allocators if opts.cross else None)
        plan = _fidelity.plan(opts.objective, opts.mem_field(),
                              {t.id: ev.baseline(t) for t in traces}, opts.fidelity == "auto",
                              _fidelity.live_peaks({t.id: t.path for t in traces})
                              if opts.fidelity == "auto" and opts.objective == "mem" else None)
        if plan.note and notice and opts.fidelity == "auto":
            notice(plan.note)
        if measure_fn is None:
            ahead = threading.Thread(target=compile_ahead, args=(study, opts, stop_ahead),
                                     name="hctune-compile-ahead", daemon=True)
            ahead.start()
        while True:
            skipped = _held_skips(study)
            _optimize(study, ev, opts, progress, deadline, plan)
            if opts.trials is None or (opts.stop_when is not None and opts.stop_when()) or \
                    deadline.passed():
                break
            # two workers that each saw the other's last trial running both skip theirs: when
            # a skip of that kind happened and the study still lacks trials, go round again
            if not _wait_for_others(study, opts.trials) and not (
                    _held_skips(study) > skipped and count_finished(study) < opts.trials):
                break
    finally:
        ev.close()
        stop_ahead.set()     # the build under way finishes (its library is cached)
    return {**summary(study, opts.objective), "fidelity": plan.as_dict()}


# time repeats: the harness stops once two repeats in a row (after the first, a fresh heap's)
# agree within this fraction; up to REPEAT_MORE repeats beyond --repeat while they do not
UNTIL_SPREAD = 0.03
REPEAT_MORE = 2


def measure_repeats(opts: Options) -> tuple[int, float | None]:
    """(replays per measurement, until_spread) a study needs. Memory is the first repeat's and
    the same every time (the harness fixes the address-space layout), so a study whose time
    does not matter (mem, no --max-slowdown) replays once; one whose time matters repeats up to
    --repeat + REPEAT_MORE times, stopping once the repeats agree (UNTIL_SPREAD). Callgrind's
    instructions are exact: --repeat as given."""
    time_matters = opts.objective != "mem" or opts.max_slowdown is not None
    if not time_matters:
        return 1, None
    if opts.metric == "time" and opts.repeat >= 3:
        return opts.repeat + REPEAT_MORE, UNTIL_SPREAD
    return opts.repeat, None


GENERIC_ABOVE_GLIBC = 5.0    # %: warn when the perf default's base is this far above glibc's


def memory_warnings(ev: _obj.Evaluator, traces, opts: Options) -> list[str]:
    """The perf default limits peak RSS to +N % over the larger of glibc's and generic HC's;
    when generic HC itself is well above glibc on a trace, that allows much more than +N % over
    glibc: say so, with the figure, and how to hold it to glibc's."""
    if not opts.memory_vs_generic or opts.max_memory_overhead is None:
        return []
    out = []
    for t in traces:
        base, ref = ev.baseline(t), ev.reference(t)
        g, h = base.get(_obj.RSS_FIELD), (ref or {}).get(_obj.RSS_FIELD)
        if not g or not h or h <= g * (1 + GENERIC_ABOVE_GLIBC / 100):
            continue
        lim = opts.max_memory_overhead
        out.append(f"generic HC's peak RSS is {h / g:.2f}x glibc's on trace #{t.id}, so the "
                   f"perf default (+{lim:g} % over the larger of the two) allows "
                   f"{h / g * (1 + lim / 100):.2f}x glibc's; --max-memory-overhead {lim:g} "
                   f"holds it to glibc's +{lim:g} %")
    return out


def study_threads(study: optuna.Study, baselines: list[dict]) -> bool:
    """Whether the study searches the thread-cache knobs: decided once, when it is new, from
    its traces (some trace has several threads, so the replay runs it on threads), and kept in
    the study so a resumed study has the same parameters.  A study made before this existed
    keeps its single-threaded parameters."""
    stored = study.user_attrs.get("threads")
    if stored is None:
        stored = bool(not study.trials and
                      any(b.get("replay_threads", 1) > 1 for b in baselines))
        study.set_user_attr("threads", stored)
    return bool(stored)


AHEAD_NICE = 10   # the builds compiled ahead run at this nice value: the replays come first


def compile_ahead(study: optuna.Study, opts: Options, stop: threading.Event) -> None:
    """Build the queued seeds' HC settings (the build cache, hctune.build) in the background
    while the replays run, so a seed's trial finds its library built. Sampled settings are not
    known ahead; with --jobs 2 and more, one trial's build overlaps another's replay anyway.
    A build that fails here is left to its trial, which reports it. Built by the recipe the
    trials use (Options.footprint_build)."""
    from hctune import build   # deferred: rendering loads Jinja2
    with contextlib.suppress(OSError, AttributeError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), AHEAD_NICE)
    for t in study.get_trials(deepcopy=False, states=(TrialState.WAITING,)):
        if stop.is_set():
            return
        params = dict(t.system_attrs.get("fixed_params") or {})
        if not allocators.of(params.pop(space.ALLOCATOR_PARAM, None)).compiled:
            continue
        try:
            build.build_hc(_fit.apply(space.setting_of(params, opts.only, opts.threads),
                                      params.get(_fit.PARAM), opts.fit_tables),
                           footprint=opts.footprint_build())
        except Exception:      # noqa: BLE001 - its trial builds it again and says why
            continue


def _optimize(study, ev, opts: Options, progress, deadline: Deadline | None = None,
              plan: _fidelity.Plan | None = None):
    target = opts.trials
    deadline = deadline or Deadline(None)
    started = time.monotonic()
    fails = {"row": 0, "last": None}

    def after_trial(st: optuna.Study, frozen):
        # A sibling process on this machine killed mid-trial (SIGKILL, OOM killer): its trial is
        # failed and queued again now, not after Optuna's heartbeat grace period.
        fail_orphans(st._storage, st._study_id)
        failed = None
        if frozen.state == TrialState.FAIL:
            fails["row"] += 1
            fails["last"] = frozen.user_attrs.get("error", "interrupted")
            failed = (frozen.number, fails["last"])
            if fails["row"] >= MAX_FAILS_IN_A_ROW:
                st.stop()
        elif frozen.state == TrialState.COMPLETE:
            fails["row"] = 0
        elif SKIPPED in frozen.user_attrs:
            st.stop()       # the others finish the study, or the deadline passed
        if deadline.passed():
            st.stop()
        done = count_finished(st)
        if target is not None and done >= target:
            st.stop()
        if opts.stop_when is not None and opts.stop_when():
            st.stop()           # asked to stop after this trial (a cancelled study)
        if progress:
            progress(st, done, target, started, failed)

    done = count_finished(study)
    if target is not None and done >= target:
        if progress:
            progress(study, done, target, started, None)
        return
    with Interrupt() as interrupt:
        interrupt.study = study
        # Each worker runs at most what is missing; the callback stops it earlier once the
        # study as a whole (all workers, all machines) holds `target` finished trials.
        # no Optuna timeout: the deadline is ours (it also stops the running replays)
        study.optimize(make_objective(ev, opts, interrupt, deadline, plan),
                       n_trials=None if target is None else target - done,
                       timeout=None, n_jobs=opts.jobs, catch=(Exception,),
                       callbacks=[after_trial], gc_after_trial=False)
    if interrupt.requested:
        raise KeyboardInterrupt
    if fails["row"] >= MAX_FAILS_IN_A_ROW:
        raise HctuneError(f"{MAX_FAILS_IN_A_ROW} trials failed in a row; last error: "
                          f"{fails['last']}")


# ---- reading results ----

def trial_allocator(frozen) -> str:
    """The allocator a trial measured: hc, or what a cross-allocator study picked."""
    return frozen.user_attrs.get("allocator", "hc")


def trial_setting(frozen) -> dict:
    """The full setting a finished trial measured (stored with it, so it reads back the same
    whatever knobs the study searched); for another allocator, its changed knobs."""
    fam = allocators.family(trial_allocator(frozen))
    key = frozen.user_attrs.get("setting")
    if key or not fam.compiled:
        return fam.from_key(key)
    return space.setting_of(frozen.params, threads=space.params_threaded(frozen.params))


def feasible(frozen) -> bool:
    return all(c <= 0 for c in frozen.user_attrs.get("constraints", []))


def finished(study: optuna.Study) -> list:
    return [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
            if "mem" in t.user_attrs]


def choose(study: optuna.Study, objective: str):
    """The trial to use for `objective` (mem|perf): the lowest ratio to glibc among feasible
    finished trials (earliest on ties); None when there is none."""
    trials = [t for t in finished(study) if feasible(t)]
    if not trials:
        return None
    return min(trials, key=lambda t: (t.user_attrs[objective], t.number))


def best_per_allocator(study: optuna.Study, objective: str) -> dict:
    """{allocator: its best feasible finished trial for objective (mem|perf)} of a
    cross-allocator study, in order of the objective."""
    best = {}
    for t in sorted((t for t in finished(study) if feasible(t)),
                    key=lambda t: (t.user_attrs[objective], t.number)):
        best.setdefault(trial_allocator(t), t)
    return best


def per_allocator(study: optuna.Study, objective: str) -> list[dict]:
    """The cross-allocator table: each allocator's best trial and its library defaults."""
    defaults = {}
    for t in finished(study):
        if allocators.of(trial_allocator(t)).is_defaults(t.user_attrs.get("setting")):
            defaults.setdefault(trial_allocator(t), t)
    rows = []
    for alloc, t in best_per_allocator(study, objective).items():
        d = defaults.get(alloc)
        rows.append({"allocator": alloc, "trial": t.number, "setting": t.user_attrs["setting"],
                     "mem_ratio": t.user_attrs["mem"], "perf_ratio": t.user_attrs["perf"],
                     "defaults_mem_ratio": d.user_attrs["mem"] if d else None,
                     "defaults_perf_ratio": d.user_attrs["perf"] if d else None})
    return rows


def pareto_front(study: optuna.Study) -> list:
    """Feasible finished trials not dominated in (mem, perf)."""
    pts = [t for t in finished(study) if feasible(t)]
    front = []
    for t in pts:
        a = (t.user_attrs["mem"], t.user_attrs["perf"])
        if not any((u.user_attrs["mem"], u.user_attrs["perf"]) != a
                   and u.user_attrs["mem"] <= a[0] and u.user_attrs["perf"] <= a[1]
                   for u in pts):
            front.append(t)
    return sorted(front, key=lambda t: t.user_attrs["mem"])


PRUNED_BY = "pruned"      # user attribute of a trial the search ended early: why (a line)
FIDELITY = "fidelity"     # user attribute: "part" (pruned there) or "whole" (measured whole)
STOPPED = "stopped"       # user attribute of a trial ended at the --timeout deadline


def accounting(study: optuna.Study) -> dict:
    """What the study searched, counted once per trial: `seeds` and `sampled` finished trials
    (the paper's, the allocators' defaults and documented advice, against what the sampler
    proposed), `pruned` (ended early: lost already, or at the deadline; `stopped` of them at the
    deadline), `failed`; `trials` is their sum. Trials skipped because the study already held
    its count, and those queued or running, are not counted. `sampler_ran`: whether the sampler
    proposed any trial at all."""
    c = {"seeds": 0, "sampled": 0, "pruned": 0, "failed": 0, "stopped": 0,
         "pruned_sampled": 0, "pruned_on_part": 0}
    for t in study.get_trials(deepcopy=False):
        if t.state == TrialState.COMPLETE:
            c["seeds" if "seed" in t.user_attrs else "sampled"] += 1
        elif t.state == TrialState.PRUNED and SKIPPED not in t.user_attrs:
            c["pruned"] += 1
            c["stopped"] += STOPPED in t.user_attrs
            c["pruned_sampled"] += "seed" not in t.user_attrs
        elif t.state == TrialState.FAIL:
            c["failed"] += 1
        if t.state in (TrialState.COMPLETE, TrialState.PRUNED) and \
                t.user_attrs.get(FIDELITY) == "part":
            c["pruned_on_part"] += 1
    c["trials"] = c["seeds"] + c["sampled"] + c["pruned"] + c["failed"]
    c["whole"] = c["seeds"] + c["sampled"]        # every finished trial was measured whole
    c["sampler_ran"] = c["sampled"] + c["pruned_sampled"] > 0
    return c


def searched_note(acc: dict) -> str | None:
    """One line when the sampler never ran (every trial a seed): the summary, `studies` and the
    verdict say it, with what to raise. None when it ran."""
    if acc["sampler_ran"] or not acc["trials"]:
        return None
    return (f"only seeds were measured ({acc['seeds']} of the paper's settings and the "
            "allocators' defaults and advice): Optuna's sampler never proposed a setting; "
            "raise --trials or --timeout to search")


def summary(study: optuna.Study, objective: str) -> dict:
    states = [t.state for t in study.get_trials(deepcopy=False)]
    acc = accounting(study)
    out = {"study": study.study_name, "objective": objective,
           "finished": states.count(TrialState.COMPLETE),
           "failed": states.count(TrialState.FAIL),
           "feasible": sum(1 for t in finished(study) if feasible(t)),
           "trials": acc, "note": searched_note(acc),
           # what --trials counts: finished, or pruned once lost (count_finished)
           "evaluated": sum(1 for t in study.get_trials(deepcopy=False) if _evaluated(t))}
    picks = ("mem", "perf") if objective == "pareto" else (objective,)
    for o in picks:
        best = choose(study, o)
        out[f"best_{o}"] = None if best is None else {
            "trial": best.number, "mem_ratio": best.user_attrs["mem"],
            "perf_ratio": best.user_attrs["perf"], "setting": best.user_attrs["setting"],
            "seed": best.user_attrs.get("seed"),
            **({"allocator": trial_allocator(best)} if "allocator" in best.user_attrs else {})}
    if any("allocator" in t.user_attrs for t in finished(study)):
        out["per_allocator"] = per_allocator(study, picks[0])
    if objective == "pareto":
        out["front"] = [t.number for t in pareto_front(study)]
    return out


def load(db: Database, name: str | None, storage: str | None = None):
    """(hc_studies row, optuna.Study) for `name`, or for the latest study when None; `storage`
    (a URL with its password) in place of the one the row names."""
    row = db.study(name) if name else db.latest_study()
    if row is None:
        if name:
            known = db.study_names()
            raise HctuneError(f"no study named {name!r}"
                              + (f"; known: {', '.join(known)}" if known else
                                 "; run `hctune search` first"))
        raise HctuneError("no study in the database; run `hctune search` first")
    url = storage or row["storage"]
    if "***" in url and url == redact(db.url):
        url = db.url          # the results database itself, opened with its password
    if "***" in url:
        raise HctuneError(f"study {row['name']} lives in {url}; its password is not stored, "
                          "pass --storage")
    return row, open_study(db, row["name"], url)
