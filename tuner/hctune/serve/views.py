"""A study's views that Optuna computes (optuna.visualization.matplotlib, optuna.importance):
the optimisation history, the knobs' importance (PED-ANOVA) and the parallel coordinates, as
SVG, made again when the study's finished trials change (at most every REDRAW_SECONDS). The
trial table and its Pareto front are hctune.serve.table's. hctune's own page keeps what no
dashboard has (the allocator comparison, the real runs, the downloads).

optuna-dashboard is not mounted: its newest release (0.21.0) serves its page at /dashboard and
its API at /api/studies/<id> on the root of the server (its bundled JavaScript is built with
those absolute paths), where hctune's own /api/studies is; it cannot live under a prefix."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor
import time
import warnings

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import Response

from hctune import allocator_knobs as _xknobs
from hctune import allocators
from hctune import report as _report
from hctune.serve.state import Service, service, study_brief
from hctune.serve.trials import finite_number

router = APIRouter(tags=["studies"])

KINDS = {"history": "plot_optimization_history", "importance": "plot_param_importances",
         "parallel": "plot_parallel_coordinate"}
_lock = threading.Lock()            # pyplot is not thread-safe
# (name, kind, target) -> (finished trials, when drawn or checked, the SVG, the study's state)
_made: dict[tuple[str, str, str], tuple[int, float, bytes, str]] = {}
REDRAW_SECONDS = 30.0   # a running study's view is drawn again at most this often
_studies: dict = {}     # name -> optuna.Study, read incrementally


def plot(svc: Service, name: str, kind: str, allocator: str | None = None) -> bytes:
    import optuna  # deferred: Optuna (as hctune.serve.trials)
    import optuna.visualization.matplotlib as vis  # deferred: matplotlib, only for a plot
    brief = study_brief(svc.queue_row(name))
    objective = brief["options"].get("objective", "mem")
    target = "mem" if objective == "pareto" else objective
    key = (name, kind, target, allocator)
    old = _made.get(key)
    if old is not None and old[3] == brief["state"] and \
            (brief["state"] in FINISHED or time.monotonic() - old[1] < REDRAW_SECONDS):
        return old[2]          # drawn moments ago, or the study is finished
    st = _studies.get(name)
    if st is None:
        try:   # kept: Optuna's cache then reads only the trials that changed since
            st = optuna.load_study(study_name=name, storage=svc.cfg.optuna_storage())
        except KeyError:
            raise HTTPException(409, f"study {name!r} has no trials yet") from None
        if len(_studies) > 32:
            _studies.clear()
        _studies[name] = st
    complete = st.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    done = [t for t in complete if finite_number(t.user_attrs.get(target)) is not None]
    if old is not None and old[0] == len(done):
        _made[key] = (old[0], time.monotonic(), old[2], brief["state"])
        return old[2]
    if len(done) < 2:
        raise HTTPException(409, f"study {name!r} has {len(done)} finished trial(s); the "
                                 "views need two")
    label = {"mem": "footprint / glibc's", "perf": "perf / glibc's"}[target]
    shown, only, knobs = _drawn(st, done, target, kind,
                                clean=len(done) == sum(target in t.user_attrs for t in complete),
                                allocator=allocator)
    if kind == "parallel":
        knobs = _that_matter(shown, target, knobs)
    with _lock, warnings.catch_warnings():
        warnings.simplefilter("ignore")          # Optuna's "experimental" warnings
        plt = _report._plt()
        try:
            extra = {}
            if kind == "importance":   # PED-ANOVA: Optuna's own (fANOVA needs scikit-learn)
                extra["evaluator"] = optuna.importance.PedAnovaImportanceEvaluator()
            if knobs is not None:
                extra["params"] = knobs
            ax = getattr(vis, KINDS[kind])(shown, target=lambda t: t.user_attrs[target],
                                           target_name=label, **extra)
        except (ValueError, RuntimeError) as e:   # e.g. importance of a single value
            plt.close("all")
            raise HTTPException(409, f"{kind}: {str(e).splitlines()[0]}") from None
        ax = ax[0] if hasattr(ax, "__len__") and not hasattr(ax, "figure") else ax
        if only is not None:   # (Optuna puts some titles on the left)
            loc = next((x for x in ("center", "left") if ax.get_title(loc=x)), "center")
            ax.set_title(f"{ax.get_title(loc=loc)}: {only}'s trials", loc=loc)
        fig = ax.figure
        fig.set_size_inches(*((11, 4.5) if kind == "parallel" else (7, 4)))
        body = _report._svg(fig).encode()
    svc.counters["view"] += 1
    if len(_made) > 64:
        _made.clear()
    _made[key] = (len(done), time.monotonic(), body, brief["state"])
    return body


def _on_grid(t) -> bool:
    try:
        return all(d._contains(d.to_internal_repr(t.params[k]))
                   for k, d in t.distributions.items())
    except (ValueError, TypeError):
        return False


def _shape(t) -> tuple:
    return tuple(sorted((k, repr(d)) for k, d in t.distributions.items()))


IMPORTANT = 0.05     # a knob's share of the importance (PED-ANOVA) to be in the parallel plot
MOST_KNOBS = 8       # at most this many knobs there (the most important)


def _that_matter(shown, target: str, knobs: list[str] | None) -> list[str] | None:
    """The knobs the parallel coordinates show: those whose importance (Optuna's PED-ANOVA
    over the trials shown) is at least IMPORTANT, the MOST_KNOBS most important; all of them
    when the importance cannot be computed (too few trials)."""
    import optuna  # deferred: Optuna (as plot())
    from hctune.search.space import ALLOCATOR_PARAM  # deferred: as Optuna
    try:
        imp = optuna.importance.get_param_importances(
            shown, evaluator=optuna.importance.PedAnovaImportanceEvaluator(),
            params=knobs, target=lambda t: t.user_attrs[target])
    except (ValueError, RuntimeError, ZeroDivisionError):
        return knobs
    keep = [k for k, v in sorted(imp.items(), key=lambda kv: -kv[1])
            if v >= IMPORTANT and k != ALLOCATOR_PARAM][:MOST_KNOBS]
    return keep if len(keep) >= 1 else knobs


def _drawn(st, done: list, target: str, kind: str, clean: bool,
           allocator: str | None = None):
    """(the study to draw, None, None): the study itself while every measured trial holds a finite
    ratio (clean), else an in-memory study of those that do (`done`). For the importance and
    the parallel coordinates of a cross-allocator study (each allocator has knobs of its own,
    so no trial has them all: Optuna's parallel coordinates would be empty, the importances
    the allocator's alone): (an in-memory study of the allocator of the best trial, its
    trials in `done` that set all its knobs; that allocator; its knobs)."""
    import optuna  # deferred: Optuna (as plot())
    from hctune.search.space import ALLOCATOR_PARAM  # deferred: as Optuna
    only = None
    if kind != "history" and len({t.params.get(ALLOCATOR_PARAM) for t in done}) > 1:
        best = min(done, key=lambda t: (t.user_attrs[target], t.number))
        only = allocator or best.params.get(ALLOCATOR_PARAM)
        done = [t for t in done if t.params.get(ALLOCATOR_PARAM) == only]
        # those that set all its knobs (its library-defaults trial sets none), over the same
        # ranges, their values on them (a seed's value may be off the search grid)
        most = max((len(t.params) for t in done), default=0)
        done = [t for t in done if len(t.params) == most and _on_grid(t)]
        shapes = Counter(_shape(t) for t in done)
        if shapes:
            common = shapes.most_common(1)[0][0]
            done = [t for t in done if _shape(t) == common]
        if len(done) < 2:
            raise HTTPException(409, f"the best allocator ({only}) has {len(done)} finished "
                                     "trial(s); the view needs two")
    elif clean:
        return st, None, None
    sub = optuna.create_study(directions=st.directions)
    try:
        sub.add_trials(done)
    except ValueError as e:     # trials Optuna will not hold in one study
        raise HTTPException(409, f"{kind}: {str(e).splitlines()[0]}") from None
    return sub, only, (None if only is None else
                       sorted(k for k in done[0].params if k != ALLOCATOR_PARAM))


def fresh(svc: Service, name: str, kind: str, allocator: str | None = None) -> bytes | None:
    """The view drawn moments ago for the study in its present state, without leaving the event
    loop (what plot() answers first); None when plot() has to look further."""
    brief = study_brief(svc.queue_row(name))
    objective = brief["options"].get("objective", "mem")
    old = _made.get((name, kind, "mem" if objective == "pareto" else objective, allocator))
    if old is not None and old[3] == brief["state"] and \
            (brief["state"] in FINISHED or time.monotonic() - old[1] < REDRAW_SECONDS):
        return old[2]
    return None


FINISHED = ("done", "failed", "cancelled")   # a view of such a study is drawn once
MAX_DRAWS = 12       # views waiting to be drawn at most (more: 429)
_drawer = ThreadPoolExecutor(1, thread_name_prefix="hctune-draw")   # one at a time
_drawing: dict[tuple[str, str], Future] = {}


def _draw(svc: Service, name: str, kind: str, allocator: str | None) -> Future:
    """plot() in the one drawing thread; a view asked again while it is drawn waits for that
    drawing; more than MAX_DRAWS different ones waiting: 429."""
    key = (name, kind, allocator)
    with _lock_drawing:
        fut = _drawing.get(key)
        if fut is not None:
            return fut
        if len(_drawing) >= MAX_DRAWS:
            raise HTTPException(429, f"{len(_drawing)} views are being drawn; ask again in "
                                     "5 s", headers={"Retry-After": "5"})
        fut = _drawing[key] = _drawer.submit(plot, svc, name, kind, allocator)

    def done(_):
        with _lock_drawing:
            _drawing.pop(key, None)
    fut.add_done_callback(done)
    return fut


_lock_drawing = threading.Lock()


def forget(name: str) -> None:
    """The study was deleted: a new one of the same name is read and drawn afresh."""
    _studies.pop(name, None)
    for k in [k for k in _made if k[0] == name]:
        _made.pop(k, None)


@router.get("/api/studies/{name}/views/{kind}.svg")
async def api_view(request: Request, name: str, kind: str,
                   allocator: str | None = Query(None, max_length=64, description=(
                       "a cross-allocator study: the importance and parallel coordinates of "
                       "this allocator's trials (default: the best trial's allocator)"))):
    """The study's optimisation history, knob importances (PED-ANOVA) or parallel coordinates
    (kind: history, importance, parallel), by Optuna, as SVG. The parallel coordinates show
    the knobs that matter: importance at least 5 %, the 8 most important."""
    svc = service(request)
    if kind not in KINDS:
        raise HTTPException(404, f"no view {kind!r}; one of {', '.join(KINDS)}")
    if allocator is not None and allocator not in allocators.families():
        raise HTTPException(422, f"allocator: hc or {', '.join(_xknobs.names())}")
    body = fresh(svc, name, kind, allocator) or \
        await asyncio.wrap_future(_draw(svc, name, kind, allocator))
    return Response(body, media_type="image/svg+xml", headers={"Cache-Control": "no-cache"})

