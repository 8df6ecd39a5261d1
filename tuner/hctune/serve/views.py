"""A study's views that Optuna computes (optuna.visualization.matplotlib, optuna.importance): the
optimisation history, the knobs' importance (PED-ANOVA) and the parallel coordinates, as SVG,
made again only when the study's finished trials change. hctune's own page keeps what no
dashboard has (the allocator comparison, the real runs, the downloads)."""

from __future__ import annotations

import threading
import warnings

from fastapi import APIRouter, Depends, HTTPException
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import Response

from hctune import report as _report
from hctune.serve.state import Service, service, study_brief

router = APIRouter(tags=["studies"])

KINDS = {"history": "plot_optimization_history", "importance": "plot_param_importances",
         "parallel": "plot_parallel_coordinate"}
_lock = threading.Lock()            # pyplot is not thread-safe
_made: dict[tuple[str, str, int, str], bytes] = {}


def plot(svc: Service, name: str, kind: str) -> bytes:
    import optuna  # deferred: Optuna (as hctune.serve.trials)
    import optuna.visualization.matplotlib as vis  # deferred: matplotlib, only for a plot
    objective = study_brief(svc.queue_row(name))["options"].get("objective", "mem")
    target = "mem" if objective == "pareto" else objective
    try:
        st = optuna.load_study(study_name=name, storage=svc.cfg.optuna_storage())
    except KeyError:
        raise HTTPException(409, f"study {name!r} has no trials yet") from None
    done = [t for t in st.get_trials(deepcopy=False,
                                     states=(optuna.trial.TrialState.COMPLETE,))
            if target in t.user_attrs]
    key = (name, kind, len(done), target)
    if key in _made:
        return _made[key]
    if len(done) < 2:
        raise HTTPException(409, f"study {name!r} has {len(done)} finished trial(s); the "
                                 "views need two")
    label = {"mem": "footprint / glibc's", "perf": "perf / glibc's"}[target]
    with _lock, warnings.catch_warnings():
        warnings.simplefilter("ignore")          # Optuna's "experimental" warnings
        plt = _report._plt()
        try:
            extra = {}
            if kind == "importance":   # PED-ANOVA: Optuna's own (fANOVA needs scikit-learn)
                extra["evaluator"] = optuna.importance.PedAnovaImportanceEvaluator()
            ax = getattr(vis, KINDS[kind])(st, target=lambda t: t.user_attrs[target],
                                           target_name=label, **extra)
        except (ValueError, RuntimeError) as e:   # e.g. importance of a single value
            plt.close("all")
            raise HTTPException(409, f"{kind}: {str(e).splitlines()[0]}") from None
        ax = ax[0] if hasattr(ax, "__len__") and not hasattr(ax, "figure") else ax
        fig = ax.figure
        fig.set_size_inches(7, 4)
        body = _report._svg(fig).encode()
    if len(_made) > 64:
        _made.clear()
    _made[key] = body
    return body


@router.get("/api/studies/{name}/views/{kind}.svg")
async def api_view(name: str, kind: str, svc: Service = Depends(service)):
    """The study's optimisation history, knob importances (PED-ANOVA) or parallel coordinates
    (kind: history, importance, parallel), by Optuna, as SVG."""
    if kind not in KINDS:
        raise HTTPException(404, f"no view {kind!r}; one of {', '.join(KINDS)}")
    body = await run_in_threadpool(plot, svc, name, kind)
    return Response(body, media_type="image/svg+xml", headers={"Cache-Control": "no-cache"})
