"""A study's options, said once: what the user chooses (`hctune search`'s flags, the service's
form and JSON API), their defaults and their bounds, and how a queued study carries them
(hc_queue.options_json). The CLI, the web service and the worker all build an `Options` here;
the worker parses a queued study's JSON once (`from_json`).

A default study searches: with DEFAULT_TRIALS trials the paper's seeded settings (28, see
seeds.py) take at most SEED_SHARE of them (`seed_limit`) and Optuna's sampler the rest.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import time
from collections.abc import Callable

from hctune.errors import HctuneError
from hctune.search import objective as _obj

DEFAULT_TRIALS = 50
# at most this share of a study's trials are the paper's seeds; the rest are searched
SEED_SHARE = 0.75
# real-run validation after the search (hctune.validate)
VALIDATE_MIN_RUNS = 3      # intervals need several runs
VALIDATE_RUNS = 10         # `hctune validate`'s and `search --validate`'s default
VALIDATE_TOP = 3           # how many of the study's best distinct settings are validated
MAX_SEED = 2**32 - 1       # Optuna's samplers take a 32-bit seed
# a study's allocators: "installed" is HC and every allocator installed where the search runs
# (search.study.expand_allocators: `hctune search`'s process, or the service's worker)
INSTALLED = "installed"
# what a new study searches when the user names no allocators (the CLI's --allocators, the
# service's form and JSON API all take it from here)
DEFAULT_ALLOCATORS = (INSTALLED,)
# what a study stored without an `allocators` key searched: HC alone (the studies of older
# versions, and `hctune search`'s HC-only rows in hc_studies, which leave the key out)
STORED_ALLOCATORS = ("hc",)


@dataclasses.dataclass
class Options:
    # ---- chosen by the user (USER: the CLI's flags, the form, the API's JSON, the queue) ----
    objective: str = "mem"
    metric: str = "time"
    trials: int | None = DEFAULT_TRIALS   # None: until the timeout
    timeout: float | None = None
    max_memory_overhead: float | None = None
    max_slowdown: float | None = None
    repeat: int = 3
    seed: int | None = None
    compare_rounds: int = 3       # rounds of measuring the other allocators once it is done
    validate_runs: int = 0        # real runs per candidate once it is done (0: none)
    validate_top: int = VALIDATE_TOP
    # ---- how this run goes ----
    jobs: int = 1
    study: str | None = None
    storage: str | None = None
    sampler: str = "tpe"          # tpe | random (random: the benchmark's baseline, no seeds)
    seeds: bool = True
    only: tuple[str, ...] | None = None   # search only these knobs (others keep their default)
    # perf without max_memory_overhead gets DEFAULT_PERF_MEMORY_OVERHEAD over the larger of
    # glibc's and generic HC's peak RSS; False lifts that
    memory_limit_default: bool = True
    memory_vs_generic: bool = False      # set by apply_defaults when the default limit applies
    # not the user's: run() sets it once per study from its traces (some trace multi-threaded:
    # the thread-cache knobs are searched too, see search/space.py)
    threads: bool = False
    # not the user's either: the study's fitted size-class tables {key: FIT_ values}, derived
    # once from its traces when HC is searched (search/fitted.py); {}: no such dimension
    fit_tables: dict = dataclasses.field(default_factory=dict, compare=False)
    # the allocators the search picks from: ("hc",) is HC alone (the paper's study); more make
    # the cross-allocator space (search/space.py: pick the allocator, then its knobs);
    # (INSTALLED,) becomes HC and every one installed when the search starts
    allocators: tuple[str, ...] = DEFAULT_ALLOCATORS
    memory_measure: str = "peak"   # what mem compares (objective.MEMORY_MEASURES)
    # asked after every trial: True stops the run there (the worker: the study was cancelled)
    stop_when: Callable[[], bool] | None = dataclasses.field(default=None, compare=False)
    # told each trial's number as this process starts measuring it (the worker says so in
    # hc_workers: the service's /workers page)
    on_trial: Callable[[int], None] | None = dataclasses.field(default=None, compare=False)
    # "auto": trials replay a part of the trace first when it ranks settings as the whole does
    # (search/fidelity.py); "whole": every trial replays the whole trace
    fidelity: str = "auto"
    # the clock --timeout's deadline is read on (tests inject their own)
    clock: Callable[[], float] = dataclasses.field(default=time.monotonic, compare=False)

    @property
    def cross(self) -> bool:
        return tuple(self.allocators) != ("hc",)

    def mem_field(self) -> str:
        if self.memory_measure in _obj.MEMORY_FIELDS:
            return _obj.MEMORY_FIELDS[self.memory_measure]
        return _obj.RSS_FIELD if self.cross else _obj.MEM_FIELD

    def footprint_build(self) -> bool:
        """Whether the study's HC trials are built by the footprint recipe (configs/build.toml's
        footprint_cflags, -Og: half of -O2's compile): only when HC's own footprint is all
        a trial measures - an HC-only mem study of the footprint (mem_field MEM_FIELD), with no
        limit on peak RSS (--max-memory-overhead) or time (--max-slowdown) and no callgrind
        count (--metric instructions). The footprint is a function of the calls and the
        setting alone, the same at any optimisation level (tests/test_build_footprint.py);
        time and RSS are not. Decided here only (search.study.run and compile_ahead ask);
        validate, emit and the service's downloads always build with the -O2 recipe."""
        return (self.objective == "mem" and self.mem_field() == _obj.MEM_FIELD
                and self.metric == "time" and self.max_memory_overhead is None
                and self.max_slowdown is None)

    def mem_name(self) -> str:
        """What mem's ratio to glibc compares (mem_field), in words: HC's own footprint in an
        HC study (the paper's measure); across allocators the replay's peak RSS; or its mean
        or final RSS (memory_measure)."""
        return {_obj.MEM_FIELD: "footprint", _obj.RSS_FIELD: "peak RSS",
                "mean_rss_bytes": "mean RSS", "final_rss_bytes": "final RSS"}[self.mem_field()]


USER = ("objective", "metric", "trials", "timeout", "max_memory_overhead", "max_slowdown",
        "repeat", "seed", "compare_rounds", "validate_runs", "validate_top", "allocators",
        "memory_measure")

# (type, lowest, highest, help) of each number the user gives; None: no bound that side.
NUMBERS = {
    "trials": (int, 1, 10000, "finished trials the study should hold"),
    "timeout": (float, 1e-3, 30 * 86400.0, "stop after this many seconds"),
    "max_memory_overhead": (float, 0.0, 1e6, "peak RSS at most this many % over glibc's"),
    "max_slowdown": (float, 0.0, 1e6, "time (or instructions) at most this many % over glibc"),
    "repeat": (int, 1, 20, "replays per measurement (the median is kept)"),
    "seed": (int, 0, MAX_SEED, "the sampler's seed (a reproducible search)"),
    "compare_rounds": (int, 0, 20, "rounds of measuring the other allocators once the search "
                                   "is done (0: none)"),
    "validate_runs": (int, 0, 100, "real runs of the profiled program per candidate once the "
                                   f"search is done; 0: none, else at least {VALIDATE_MIN_RUNS}"),
    "validate_top": (int, 1, 10, "how many of the study's best distinct settings are "
                                 "validated"),
}


def default(name: str):
    return next(f.default for f in dataclasses.fields(Options) if f.name == name)


def check_number(name: str, value) -> None:
    """One line naming the option when `value` is not a finite number within its bounds."""
    kind, lo, hi, _ = NUMBERS[name]
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            (kind is int and not float(value).is_integer()):
        raise HctuneError(f"{name}: {'a whole number' if kind is int else 'a number'}, "
                          f"not {value!r}")
    if not math.isfinite(value) or (lo is not None and value < lo) or \
            (hi is not None and value > hi):
        raise HctuneError(f"{name}: from {lo:g} to {hi:g}, not {value!r}")


def check(opts: Options) -> Options:
    """Every user number finite and within NUMBERS' bounds, validation asked for with enough
    runs; the objective and metric are checked by search.objective.check_choice."""
    for name in NUMBERS:
        check_number(name, getattr(opts, name))
    if 0 < opts.validate_runs < VALIDATE_MIN_RUNS:
        raise HctuneError(f"validate_runs: 0 (no validation) or at least {VALIDATE_MIN_RUNS} "
                          "(intervals need several runs)")
    return opts


def cores() -> int:
    """The cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def parse_jobs(text, time_matters: bool = False) -> int:
    """--jobs: a whole number from 1, or "auto": one trial per core this process may use when
    only memory is measured (deterministic: replays side by side do not change it), one at a
    time when time is measured (replays side by side slow each other down)."""
    if isinstance(text, int) and not isinstance(text, bool):
        value = text
    elif isinstance(text, str) and text.strip().lower() == "auto":
        return 1 if time_matters else cores()
    else:
        try:
            value = int(str(text).strip())
        except ValueError:
            raise HctuneError(f"--jobs takes a whole number or 'auto', not {text!r}") from None
    if value < 1:
        raise HctuneError(f"--jobs must be at least 1 (or 'auto'), not {value}")
    return value


def seed_limit(opts: Options, finished: int = 0) -> int | None:
    """How many seeds a study may still queue: SEED_SHARE of the trials it still needs (so
    every queued seed runs and some trials are left to the sampler); None: no bound (a study
    that runs until its timeout)."""
    if opts.trials is None:
        return None
    left = max(0, opts.trials - finished)
    return int(left * SEED_SHARE) if left >= 4 else left


def to_json(opts: Options) -> dict:
    """The user's options as a queued study carries them."""
    return {k: list(v) if isinstance(v, tuple) else v
            for k, v in ((k, getattr(opts, k)) for k in USER)}


def from_json(text: str | dict | None, **run) -> Options:
    """A queued study's options (hc_queue.options_json), parsed and checked once; keys it
    lacks take their defaults (but one without `allocators` was stored as an HC study:
    STORED_ALLOCATORS), keys it does not know are ignored; `run`: how this run goes (study,
    storage, ...)."""
    try:
        o = json.loads(text) if isinstance(text, str) else dict(text or {})
    except ValueError:
        raise HctuneError("the study's stored options are not JSON") from None
    if not isinstance(o, dict):
        raise HctuneError("the study's stored options are not a JSON object")
    given = {k: o[k] for k in USER if k in o}
    if "allocators" in given:
        a = given["allocators"]
        if not isinstance(a, (list, tuple)) or not all(isinstance(x, str) for x in a):
            raise HctuneError("allocators: a list of allocator names")
        given["allocators"] = tuple(a)
    else:
        given["allocators"] = STORED_ALLOCATORS
    return check(Options(**given, **run))


def mem_name_of(stored) -> str:
    """Options.mem_name() of a study's stored options (JSON text or a dict); "memory" when
    they do not read."""
    try:
        return from_json(stored).mem_name()
    except (HctuneError, TypeError, KeyError):
        return "memory"


def stored_defaults() -> dict:
    """What a stored study's options_json lacks reads as (as to_json gives them): the
    defaults, but HC alone for one without `allocators` (see from_json)."""
    return {**to_json(Options()), "allocators": list(STORED_ALLOCATORS)}
