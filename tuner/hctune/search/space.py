"""The Optuna search space, made from the `search` field of each knob in configs/knobs.toml
(HC) and configs/allocators.toml (the others).

There is no second list of knobs here: a knob joins the search by its `search` field alone, and
each allocator family says which of its knobs the search varies and how (hctune.allocators.
Family.search_*): one path makes every family's parameters. Each searchable knob becomes one
Optuna parameter; `params_of` and `setting_of` translate between Optuna parameters and a setting
(allocator None: HC's full setting), so enqueued seeds and stored trials read back the same way.

Knobs with `threads = true` (the thread cache's) are searched only when `threads` is true: a
study over a multi-threaded trace, which the replay measures on threads (docs/replay.md).  A
single-threaded replay never reaches the thread cache, so searching them there would only add
noise.  A study decides this once, from its traces, and keeps it (search/study.py), so its
parameter set stays the same when it is resumed.  Such a knob may name a `single_thread_value`
that a single-threaded study holds instead of its default: ARENAS = 1, since arenas cost a
single-threaded program a few instructions per call and give it nothing.
"""

from __future__ import annotations

import math

import optuna
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

from hctune import allocators
from hctune import knobs as _knobs
from hctune.errors import HctuneError

def _param(name: str, kind: str) -> str:
    """The Optuna parameter that carries a knob named `name` searched as `kind` (named so a reader
    sees the transform): HC's knobs and the other allocators' alike."""
    return {"pow2": f"{name}_log2", "log_or_zero": f"{name}+1"}.get(kind, name)


def _encode(name: str, kind: str, value):
    """A knob's value as its Optuna parameter (`_param`'s transform)."""
    if kind == "pow2":
        exp = math.log2(value)
        if not exp.is_integer():
            raise HctuneError(f"{name}={value} is not a power of two")
        return int(exp)
    if kind == "log_or_zero":
        return int(value) + 1
    return value


def _decode(kind: str, value):
    """An Optuna parameter back as the knob's value."""
    if kind == "pow2":
        return 2 ** int(value)
    if kind == "log_or_zero":
        return int(value) - 1
    return value


def _distribution(k, where: str, choices, step: int):
    """The one mapping from a knob's search kind to its Optuna distribution, for HC's knobs
    (configs/knobs.toml) and the other allocators' (configs/allocators.toml): `choices` are a
    "choice" knob's values (None: the kind is refused), `step` an "int" knob's grid step, and
    `where` names the declaration in errors."""
    lo = k.search_min if k.search_min is not None else k.min
    hi = k.search_max if k.search_max is not None else k.max
    kind = k.search
    if kind == "fixed":
        return None
    if kind == "choice":
        if choices is None:
            raise HctuneError(f"{where}: search 'choice' is for boolean knobs")
        return CategoricalDistribution(list(choices))
    if kind == "int":
        # The last grid point must stay inside the legal range.
        hi = lo + (hi - lo) // step * step
        return IntDistribution(int(lo), int(hi), step=int(step))
    if kind == "float":
        return FloatDistribution(float(lo), float(hi))
    if kind == "log":
        return IntDistribution(int(lo), int(hi), log=True)
    if kind == "pow2":
        return IntDistribution(math.ceil(math.log2(lo)), math.floor(math.log2(hi)))
    if kind == "log_or_zero":
        # Log-uniform over 1..hi+1 shifted down by one: 0 ("never") stays reachable and small
        # values get as much attention as large ones.
        return IntDistribution(int(lo) + 1, int(hi) + 1, log=True)
    raise HctuneError(f"{where}: unknown search kind {kind!r}")


def _family(allocator: str | None):
    """The family whose knobs a call searches (None: HC, the study of the paper)."""
    return allocators.family(allocator)


def _param_of(fam, k) -> str:
    """The Optuna parameter that carries knob `k` of `fam` (HC's under their names, the
    others' as "jemalloc.narenas"; "+1" for log_or_zero, "_log2" for pow2)."""
    return _param(fam.search_stem(k), k.search)


def _dimension(fam, k):
    """The Optuna distribution of knob `k` of `fam`, or None when it is not searched."""
    return _distribution(k, fam.search_where(k), fam.search_choices(k), fam.search_step(k))


def param_name(k: _knobs.Knob) -> str:
    """The Optuna parameter that carries HC's knob `k`."""
    return _param_of(_family(None), k)


def distribution(k: _knobs.Knob):
    """The Optuna distribution of HC's knob `k`, or None when it is not searched."""
    return _dimension(_family(None), k)


def searched(only=None, threads: bool = False, allocator: str | None = None) -> dict:
    """The knobs the search varies, in their file's order (allocator None: HC's, whose
    `only` (names) narrows them, the rest keeping their default as if they were fixed).
    threads: the study has a multi-threaded trace, so the `threads = true` knobs are searched
    too."""
    return _family(allocator).search_knobs(only, threads)


def distributions(only=None, threads: bool = False,
                  allocator: str | None = None) -> dict[str, optuna.distributions.BaseDistribution]:
    """{Optuna parameter name: distribution} for every searched knob of `allocator`."""
    fam = _family(allocator)
    return {_param_of(fam, k): _dimension(fam, k) for k in fam.search_knobs(only, threads).values()}


def fixed_values(only=None, threads: bool = False) -> dict:
    """The values HC's knobs that are not searched keep during a search."""
    return _family(None).search_fixed(only, threads)


def params_threaded(params: dict) -> bool:
    """Whether stored Optuna parameters come from a study that searched the thread knobs."""
    return any(param_name(k) in params for k in _knobs.knobs().values() if k.threads)


def _to_param(stem: str, k, value):
    if k.search in ("pow2", "log_or_zero"):
        return _encode(stem, k.search, value)
    if k.type == "choice":
        return value
    return float(value) if k.type == "float" else int(value)


def params_of(setting: dict, only=None, threads: bool = False,
              allocator: str | None = None) -> dict:
    """The Optuna parameters of a setting of `allocator` (for study.enqueue_trial): HC's full
    setting, another's changed knobs (the rest at the library's defaults)."""
    fam = _family(allocator)
    full = fam.search_full(setting)
    return {_param_of(fam, k): _to_param(fam.search_stem(k), k, full[n])
            for n, k in fam.search_knobs(only, threads).items()}


def setting_of(params: dict, only=None, threads: bool = False,
               allocator: str | None = None) -> dict:
    """The checked setting of a trial's parameters: HC's full setting (fixed knobs take their
    search value), another allocator's changed knobs."""
    fam = _family(allocator)
    values = {}
    for name, k in fam.search_knobs(only, threads).items():
        p = _param_of(fam, k)
        if p in params:
            values[name] = _decode(k.search, params[p])
        elif fam.search_strict:
            raise HctuneError(f"trial has no parameter {p!r}: the study was made with other knobs")
    return fam.search_setting(values, only, threads)


def for_search(setting: dict, allocator: str | None = None) -> dict:
    """A setting as the search measures it (HC's: fixed knobs set to their search value)."""
    return _family(allocator).as_searched(setting)


def _sample(trial: optuna.trial.BaseTrial, dists: dict) -> dict:
    """{param: value} drawn in `trial` from {param: distribution}: HC's knobs and others' alike."""
    params = {}
    for p, dist in dists.items():
        if isinstance(dist, CategoricalDistribution):
            params[p] = trial.suggest_categorical(p, dist.choices)
        elif isinstance(dist, FloatDistribution):
            params[p] = trial.suggest_float(p, dist.low, dist.high, log=dist.log)
        elif dist.log:
            params[p] = trial.suggest_int(p, dist.low, dist.high, log=True)
        else:
            params[p] = trial.suggest_int(p, dist.low, dist.high, step=dist.step)
    return params


def suggest(trial: optuna.trial.BaseTrial, only=None, threads: bool = False,
            allocator: str | None = None) -> dict:
    """Sample one setting of `allocator` (None: HC) in `trial`."""
    return setting_of(_sample(trial, distributions(only, threads, allocator)), only, threads,
                      allocator)


# ---- the cross-allocator space (search --allocators hc,glibc,jemalloc,...) ----
#
# Optuna's conditional space: the trial first picks its allocator (parameter "allocator"), then
# only that allocator's knobs: HC's under their names above, the others' (configs/
# allocators.toml) as "jemalloc.narenas" and so on ("jemalloc.narenas+1" for log_or_zero).

ALLOCATOR_PARAM = "allocator"


def suggest_allocator(trial: optuna.trial.BaseTrial, names, only=None,
                      threads: bool = False) -> tuple[str, dict]:
    """Pick the allocator, then sample its knobs: (allocator, setting) — HC's full setting, or
    another allocator's changed knobs."""
    name = trial.suggest_categorical(ALLOCATOR_PARAM, list(names))
    return name, suggest(trial, only, threads, name)
