"""`hctune report`: one self-contained HTML page about a study.

Plots (matplotlib, SVG inline, no network resource): the trace's request-size histogram and live
bytes over time (the allocation graph of Hasan & Chang 2006, Fig. 5), footprint against the most
bytes live per allocator (fragmentation as footprint / live - 1), the Pareto front of footprint
and time, and the optimisation history. The numbers behind them are embedded as deterministic
JSON (sorted keys, no timestamps) so a script can read the page too.
"""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

from hctune import __version__, allocators
from hctune import knobs as _knobs
from hctune import realruns, templating
from hctune import trace as _trace
from hctune.db import Database
from hctune.files import write_atomic
from hctune.errors import HctuneError
from hctune.search import results
from hctune.search import space
from hctune.search import study as _study


def _svg(fig) -> str:
    import matplotlib.pyplot as plt  # deferred: matplotlib (~0.5 s), only when a page has plots
    buf = io.StringIO()
    # No date, fixed ids: the same data gives the same bytes.
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg"):]


def _plt():
    import matplotlib  # deferred: matplotlib (~0.5 s), only when a page has plots
    matplotlib.use("Agg")
    matplotlib.rcParams["svg.hashsalt"] = "hctune"
    matplotlib.rcParams["svg.fonttype"] = "none"
    import matplotlib.pyplot as plt  # deferred: matplotlib (~0.5 s), only when a page has plots
    return plt


# ---- the data ----

def _trace_stats(row) -> dict | None:
    if row["stats_json"]:
        return json.loads(row["stats_json"])
    try:
        return _trace.stats(row["path"])
    except Exception:  # the trace may be gone; the page says so instead of failing
        return None


def _allocator_rows(db: Database, trace_id: int, metric: str, tuned: dict,
                    tuned_allocator: str = "hc") -> list[dict]:
    """Footprint vs max live bytes for every allocator measured on the trace (latest row each),
    HC as generic and as tuned. In a database several machines share, the rows are one
    machine's: the one that measured the most of them (times of two machines do not compare)."""
    generic_key = _knobs.key(space.for_search(_knobs.preset("generic")))
    tuned_key = allocators.setting_key(tuned_allocator, tuned)
    by_host: dict[str, dict] = {}
    last_id: dict[str, int] = {}
    for m in db.measurements(trace_id=trace_id):
        if m["allocator"] == "hc":
            label = {generic_key: "hc generic"}.get(m["setting"])
            if tuned_allocator == "hc" and m["setting"] == tuned_key:
                label = "hc tuned"
            if label is None:
                continue
        elif m["setting"] is None:
            label = m["allocator"]            # as it comes
        elif m["allocator"] == tuned_allocator and m["setting"] == tuned_key:
            label = f"{m['allocator']} tuned"  # the answer of a search across allocators
        else:
            continue
        latest = by_host.setdefault(m["host"], {})
        last_id[m["host"]] = m["id"]
        if m["metric"] == metric or label not in latest:
            latest[label] = json.loads(m["result_json"])
    latest = max(by_host.items(), key=lambda h: (len(h[1]), last_id[h[0]]))[1] \
        if by_host else {}
    rows = []
    for label in sorted(latest):
        r = latest[label]
        rows.append({"allocator": label, "footprint_bytes": r.get("footprint_bytes"),
                     "peak_rss_bytes": r.get("peak_rss_bytes"),
                     "max_live_bytes": r.get("max_live_bytes"),
                     "time_ns_per_op": r.get("time_ns_per_op"),
                     "instructions_per_op": r.get("instructions_per_op")})
    return rows


def collect(db_path, name: str | None = None) -> dict:
    """Everything the page shows, as plain data."""
    with Database(db_path) as db:
        row, st = _study.load(db, name)
        opts = json.loads(row["options_json"] or "{}")
        metric = opts.get("metric", "time")
        generic = space.for_search(_knobs.preset("generic"))
        trials = []
        for t in _study.finished(st):
            alloc = _study.trial_allocator(t)
            changed = _knobs.diff_from(_study.trial_setting(t), generic) if alloc == "hc" \
                else _study.trial_setting(t)
            trials.append({"number": t.number, "allocator": alloc, "mem": t.user_attrs["mem"],
                           "perf": t.user_attrs["perf"], "feasible": _study.feasible(t),
                           "seed": t.user_attrs.get("seed"), "setting": t.user_attrs["setting"],
                           "changed": ", ".join(f"{k}={v}" for k, v in changed.items())
                                      or "nothing"})
        front = [t.number for t in _study.pareto_front(st)]
        best = {}
        for o in ("mem", "perf"):
            t = _study.choose(st, o)
            if t is not None:
                best[o] = {"trial": t.number, "setting": _study.trial_setting(t),
                           "allocator": _study.trial_allocator(t)}
        main = best.get("mem" if row["objective"] != "perf" else "perf")
        real = realruns.latest(db, row["name"])
        if real and real.get("winner"):
            main = {"trial": real["winner"]["trial"],
                    "setting": realruns.winner_setting(real),
                    "allocator": real["winner"].get("allocator") or "hc"}
        traces = []
        for tr in results.study_traces(db, row):
            trow = db.trace(tr.id)
            stats = _trace_stats(trow)
            traces.append({
                "id": tr.id, "path": tr.path, "command": tr.command,
                "events": trow["events"],
                "size_histogram": (stats or {}).get("histogram"),
                "live_bytes": (stats or {}).get("graph"),
                "summary": {k: v for k, v in (stats or {}).items()
                            if isinstance(v, (int, float, str)) and not isinstance(v, bool)},
                "allocators": _allocator_rows(db, tr.id, metric,
                                              main["setting"] if main else {},
                                              main.get("allocator", "hc") if main else "hc"),
            })
    return {"study": row["name"], "objective": row["objective"], "metric": metric,
            "options": opts, "hctune_version": __version__, "trials": trials, "front": front,
            "best": best, "traces": traces, "validation": real}


# ---- the plots ----

def _hist_plot(plt, hist) -> str | None:
    """`hist`: hctune.trace.stats' histogram, [{"max_size", "count", "bytes"}, ...]."""
    if not hist:
        return None
    fig, ax = plt.subplots(figsize=(7, 3))
    ax.bar(range(len(hist)), [h["count"] for h in hist], color="#4a78b0")
    ax.set_xticks(range(len(hist)))
    ax.set_xticklabels([f"≤{h['max_size']:,}" for h in hist], rotation=45, fontsize=7)
    ax.set_xlabel("request size (bytes)")
    ax.set_ylabel("requests")
    ax.set_yscale("log")
    ax.set_title("Request sizes")
    return _svg(fig)


def _live_plot(plt, graph) -> str | None:
    """`graph`: hctune.trace.stats' {"event": [...], "live_bytes": [...]}, the allocation graph
    of Hasan & Chang 2006, Fig. 5 (tall peaks and low valleys call for COALESCE_IN_FREE, §5.2)."""
    if not graph or not graph.get("event"):
        return None
    fig, ax = plt.subplots(figsize=(7, 3))
    ax.plot(graph["event"], [y / 1024 for y in graph["live_bytes"]], color="#b0504a", lw=1)
    ax.set_xlabel("allocation events")
    ax.set_ylabel("live KiB")
    ax.set_title("Live bytes over time (allocation graph)")
    return _svg(fig)


def _alloc_plot(plt, rows) -> str | None:
    rows = [r for r in rows if r["footprint_bytes"] or r["peak_rss_bytes"]]
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(7, 3))
    xs = range(len(rows))
    w = 0.27
    kib = lambda v: (v or 0) / 1024  # noqa: E731
    ax.bar([x - w for x in xs], [kib(r["footprint_bytes"]) for r in rows], w, label="footprint",
           color="#4a78b0")
    ax.bar(list(xs), [kib(r["peak_rss_bytes"]) for r in rows], w, label="peak RSS",
           color="#9bb6d6")
    ax.bar([x + w for x in xs], [kib(r["max_live_bytes"]) for r in rows], w,
           label="max live bytes", color="#b0504a")
    ax.set_xticks(list(xs))
    ax.set_xticklabels([r["allocator"] for r in rows], rotation=20, fontsize=8)
    ax.set_ylabel("KiB")
    ax.set_title("Footprint vs live memory per allocator")
    ax.legend(fontsize=7)
    return _svg(fig)


def _front_plot(plt, trials, front, metric) -> str | None:
    if not trials:
        return None
    fig, ax = plt.subplots(figsize=(5.5, 4))
    ok = [t for t in trials if t["feasible"]]
    bad = [t for t in trials if not t["feasible"]]
    ax.scatter([t["mem"] for t in ok], [t["perf"] for t in ok], s=14, color="#9bb6d6",
               label="trials")
    if bad:
        ax.scatter([t["mem"] for t in bad], [t["perf"] for t in bad], s=14, marker="x",
                   color="#999999", label="over a limit")
    fr = sorted((t for t in trials if t["number"] in front), key=lambda t: t["mem"])
    ax.plot([t["mem"] for t in fr], [t["perf"] for t in fr], "o-", color="#b0504a", ms=4,
            label="Pareto front")
    ax.axvline(1.0, color="#cccccc", lw=0.8)
    ax.axhline(1.0, color="#cccccc", lw=0.8)
    ax.set_xlabel("footprint / glibc")
    ax.set_ylabel(f"{metric} / glibc")
    ax.set_title("Footprint and speed of every trial")
    ax.legend(fontsize=7)
    return _svg(fig)


def _history_plot(plt, trials, objective) -> str | None:
    if not trials:
        return None
    keys = ("mem", "perf") if objective == "pareto" else (objective,)
    fig, ax = plt.subplots(figsize=(7, 3))
    ordered = sorted(trials, key=lambda t: t["number"])
    for k, color in zip(keys, ("#4a78b0", "#b0504a")):
        xs = [t["number"] for t in ordered]
        ax.scatter(xs, [t[k] for t in ordered], s=10, color=color, alpha=0.5,
                   label=f"{k} / glibc")
        best, line = math.inf, []
        for t in ordered:
            if t["feasible"]:
                best = min(best, t[k])
            line.append(best if best < math.inf else None)
        ax.step(xs, line, where="post", color=color, lw=1.2, label=f"best {k} so far")
    ax.set_xlabel("trial")
    ax.set_ylabel("ratio to glibc")
    ax.set_title("Optimisation history (seeds first: Tables 6-7, §5.2)")
    ax.legend(fontsize=7)
    return _svg(fig)


def _real_plot(plt, v) -> str | None:
    """Real runs: wall time and peak RSS of each candidate over glibc's, with the 95 % interval
    (paired bootstrap), the replay's prediction beside each (hollow marker)."""
    rows = [c for c in (v or {}).get("candidates", [])
            if not c["disqualified"] and c["candidate"] != "glibc"
            and c["vs_glibc"].get("wall_s")]
    if not rows:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(9, 0.45 * len(rows) + 1.4), sharey=True)
    ys = list(range(len(rows)))
    for ax, m, rk, title in ((axes[0], "wall_s", "perf_ratio", "wall time / glibc"),
                             (axes[1], "peak_rss_bytes", "mem_ratio", "peak RSS / glibc")):
        r = [c["vs_glibc"][m] for c in rows]
        x = [e["ratio"] for e in r]
        err = [[e["ratio"] - e["ci"][0] for e in r], [e["ci"][1] - e["ratio"] for e in r]]
        colors = ["#b0504a" if c["candidate"] == (v.get("winner") or {}).get("candidate")
                  else "#4a78b0" for c in rows]
        ax.errorbar(x, ys, xerr=err, fmt="none", ecolor="#555555", capsize=3, lw=1)
        ax.scatter(x, ys, color=colors, zorder=3, label="real (median, 95 % CI)")
        pred = [(c["replay"] or {}).get(rk) for c in rows]
        py = [y + 0.2 for y, p in zip(ys, pred) if p is not None]
        ax.scatter([p for p in pred if p is not None], py, facecolors="none",
                   edgecolors="#333333", marker="D", s=22,
                   label="replay prediction" + (" (footprint)" if rk == "mem_ratio" else ""))
        ax.axvline(1.0, color="#cccccc", lw=0.8)
        ax.set_title(title, fontsize=9)
        ax.legend(fontsize=6, loc="best")
    axes[0].set_yticks(ys)
    axes[0].set_yticklabels([c["candidate"] for c in rows], fontsize=8)
    axes[0].invert_yaxis()
    fig.suptitle(f"Real runs ({v['runs']} each, interleaved): {' '.join(v['program']['argv'])[:80]}",
                 fontsize=9)
    return _svg(fig)


def render(data: dict) -> str:
    plt = _plt()
    figures = {"real": _real_plot(plt, data.get("validation")),"front": _front_plot(plt, data["trials"], data["front"], data["metric"]),
               "history": _history_plot(plt, data["trials"], data["objective"]),
               "traces": [{"sizes": _hist_plot(plt, t["size_histogram"]),
                           "live": _live_plot(plt, t["live_bytes"]),
                           "allocators": _alloc_plot(plt, t["allocators"])}
                          for t in data["traces"]]}
    blob = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    blob = blob.replace("</", "<\\/")  # cannot close the <script> it sits in
    return templating.render("report.html.j2", data=data, figures=figures, data_json=blob,
                             title=f"hctune report: {data['study']}", version=__version__)


def report(db_path, out, name: str | None = None) -> dict:
    out = Path(out)
    if out.is_dir():
        raise HctuneError(f"-o {out} is a directory; name the file, e.g. -o {out}/report.html")
    data = collect(db_path, name)
    write_atomic(out, render(data))
    return {"report": str(out), "study": data["study"], "trials": len(data["trials"])}
