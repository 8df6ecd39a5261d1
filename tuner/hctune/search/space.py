"""The Optuna search space, made from the `search` field of each knob in configs/knobs.toml.

There is no second list of knobs here: a knob joins the search by its `search` field alone.
Each searchable knob becomes one Optuna parameter; `params_of` and `setting_of` translate
between Optuna parameters and a full HC setting, so enqueued seeds and stored trials read back
the same way.

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

from hctune import allocator_knobs as _xknobs
from hctune import allocators
from hctune import knobs as _knobs
from hctune.errors import HctuneError

# Knobs whose search kind is "fixed" keep this value during a search when the paper gives one:
# MONITOR is "usually turned off unless statistics are to be collected" (Hasan & Chang 2006,
# §5.2, and every Table 7 row), so the builds measured are the builds emitted.
FIXED_IN_SEARCH = {"MONITOR": 0}


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


def param_name(k: _knobs.Knob) -> str:
    """The Optuna parameter that carries HC's knob `k`."""
    return _param(k.name, k.search)


def distribution(k: _knobs.Knob):
    """The Optuna distribution of HC's knob `k`, or None when it is not searched."""
    return _distribution(k, f"knobs.toml: {k.name}", [0, 1] if k.type == "bool" else None,
                         k.search_step or k.step or 1)


def searched(only=None, threads: bool = False) -> dict[str, _knobs.Knob]:
    """The knobs the search varies, in knobs.toml order; `only` (names) narrows them, the rest
    keep their default as if they were fixed.  threads: the study has a multi-threaded trace,
    so the `threads = true` knobs are searched too."""
    table = {n: k for n, k in _knobs.knobs().items()
             if k.search != "fixed" and (threads or not k.threads)}
    if only is None:
        return table
    gated = [n for n in only if n not in table and n in _knobs.knobs() and
             _knobs.knobs()[n].threads and _knobs.knobs()[n].search != "fixed"]
    if gated:
        raise HctuneError(f"{', '.join(gated)}: searched only when a trace of the study is "
                          f"multi-threaded (the thread cache is never used on one thread)")
    unknown = [n for n in only if n not in table]
    if unknown:
        raise HctuneError(f"not searchable knobs: {', '.join(unknown)}; searchable: "
                          f"{', '.join(table)}")
    return {n: k for n, k in table.items() if n in only}


def distributions(only=None,
                  threads: bool = False) -> dict[str, optuna.distributions.BaseDistribution]:
    """{Optuna parameter name: distribution} for every searched knob."""
    return {param_name(k): distribution(k) for k in searched(only, threads).values()}


def fixed_values(only=None, threads: bool = False) -> dict:
    """The values the knobs that are not searched keep during a search."""
    out = {}
    varied = searched(only, threads)
    for name, k in _knobs.knobs().items():
        if name not in varied:
            value = FIXED_IN_SEARCH.get(name, k.default)
            if not threads and k.single_thread_value is not None:
                value = k.single_thread_value
            out[name] = k.check(value)
    return out


def params_threaded(params: dict) -> bool:
    """Whether stored Optuna parameters come from a study that searched the thread knobs."""
    return any(param_name(k) in params for k in _knobs.knobs().values() if k.threads)


def _to_param(k: _knobs.Knob, value):
    if k.search in ("pow2", "log_or_zero"):
        return _encode(k.name, k.search, value)
    return float(value) if k.type == "float" else int(value)


def params_of(setting: dict, only=None, threads: bool = False) -> dict:
    """The Optuna parameters of a full setting (for study.enqueue_trial)."""
    setting = _knobs.complete(setting)
    return {param_name(k): _to_param(k, setting[n]) for n, k in searched(only, threads).items()}


def setting_of(params: dict, only=None, threads: bool = False) -> dict:
    """The full, checked setting of a trial's parameters (fixed knobs take their search value)."""
    values = dict(fixed_values(only, threads))
    for name, k in searched(only, threads).items():
        p = param_name(k)
        if p not in params:
            raise HctuneError(f"trial has no parameter {p!r}: the study was made with other knobs")
        values[name] = _decode(k.search, params[p])
    return _knobs.complete(values)


def for_search(setting: dict) -> dict:
    """A setting as the search measures it: fixed knobs set to their search value."""
    out = _knobs.complete(setting).copy()     # (a completed setting may be the caller's)
    out.update(fixed_values())
    return out


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


def suggest(trial: optuna.trial.BaseTrial, only=None, threads: bool = False) -> dict:
    """Sample one setting in `trial`; returns the full setting."""
    return setting_of(_sample(trial, distributions(only, threads)), only, threads)


# ---- the cross-allocator space (search --allocators hc,glibc,jemalloc,...) ----
#
# Optuna's conditional space: the trial first picks its allocator (parameter "allocator"), then
# only that allocator's knobs: HC's under their names above, the others' (configs/
# allocators.toml) as "jemalloc.narenas" and so on ("jemalloc.narenas+1" for log_or_zero).

ALLOCATOR_PARAM = "allocator"


def x_param_name(k) -> str:
    return _param(k.full_name, k.search)


def x_distribution(k):
    """The Optuna distribution of another allocator's knob `k`, or None when not searched."""
    return _distribution(k, f"allocators.toml: {k.full_name}",
                         k.choices if k.type == "choice" else [0, 1], k.search_step or 1)


def x_searched(name: str, threads: bool = False) -> dict:
    """Another allocator's searched knobs ({name: XKnob}); thread knobs only when `threads`."""
    return {n: k for n, k in _xknobs.knobs(name).items()
            if k.search != "fixed" and (threads or not k.threads)}


def x_params_of(name: str, setting: dict, threads: bool = False) -> dict:
    """The Optuna parameters of allocator `name` with `setting` (changed knobs; the rest at
    the library's defaults), "allocator" included."""
    full = {**_xknobs.defaults(name), **_xknobs.complete(name, setting)}
    params = {ALLOCATOR_PARAM: name}
    for n, k in x_searched(name, threads).items():
        params[x_param_name(k)] = _encode(k.full_name, k.search, full[n])
    return params


def x_setting_of(name: str, params: dict, threads: bool = False) -> dict:
    out = {}
    for n, k in x_searched(name, threads).items():
        p = x_param_name(k)
        if p in params:
            out[n] = _decode(k.search, params[p])
    return _xknobs.complete(name, out)


def suggest_allocator(trial: optuna.trial.BaseTrial, names, only=None,
                      threads: bool = False) -> tuple[str, dict]:
    """Pick the allocator, then sample its knobs: (allocator, setting) — HC's full setting, or
    another allocator's changed knobs."""
    name = trial.suggest_categorical(ALLOCATOR_PARAM, list(names))
    if allocators.family(name).compiled:      # HC: its compiled knobs
        return name, suggest(trial, only, threads)
    dists = {x_param_name(k): x_distribution(k) for k in x_searched(name, threads).values()}
    return name, x_setting_of(name, _sample(trial, dists), threads)
