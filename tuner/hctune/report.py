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

from hctune import __version__, allocators, compare
from hctune import explain as _explain
from hctune import knobs as _knobs
from hctune import realruns, templating
from hctune.trace import register
from hctune.db import Database
from hctune.files import write_atomic
from hctune.errors import HctuneError
from hctune.search import answer as _answer
from hctune.search import results
from hctune.search import space
from hctune.search import study as _study
from hctune.validate import rule

REFERENCES = ("jemalloc", "mimalloc", "tcmalloc")


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

def _trace_stats(db: Database, row) -> dict | None:
    if row["stats_json"]:
        return json.loads(row["stats_json"])
    try:
        return register.stats_of(db, row)     # profile leaves them to the first reader
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
        if allocators.of(m["allocator"]).is_defaults(m["setting"]):
            label = m["allocator"]            # as it comes
        elif m["allocator"] == tuned_allocator and m["setting"] == tuned_key:
            label = f"{m['allocator']} tuned"  # the answer (of a search across allocators too)
        elif m["setting"] == generic_key:
            label = f"{m['allocator']} generic"   # HC's generic setting
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
        # a footprint study's build (hctune.build.FOOTPRINT_CFLAGS): only its footprint is the
        # library's, its time and RSS are not
        lib = (lambda f: None if r.get("footprint_build") else r.get(f))  # noqa: E731
        rows.append({"allocator": label, "footprint_bytes": r.get("footprint_bytes"),
                     "peak_rss_bytes": lib("peak_rss_bytes"),
                     "max_live_bytes": r.get("max_live_bytes"),
                     "time_ns_per_op": lib("time_ns_per_op"),
                     "instructions_per_op": lib("instructions_per_op")})
    return rows


def collect(db_path, name: str | None = None, objective: str | None = None,
            measure_references: bool = True, first_screen: bool = True) -> dict:
    """Everything the page shows, as plain data (`objective` without `name`: the latest study
    of that objective on the latest traces); `measure_references`: replay the installed
    jemalloc, mimalloc and tcmalloc on each trace once when nothing measured them yet;
    `first_screen`: replay the answer and the best allocator as it comes on the first trace to
    show where their bytes go (hctune.explain; two replays)."""
    with Database(db_path) as db:
        if name is None and objective is not None:
            name = results.study_for(db, objective)
        row, st = _study.load(db, name)
        opts = json.loads(row["options_json"] or "{}")
        metric = opts.get("metric", "time")
        generic = space.for_search(_knobs.preset("generic"))
        trials = []
        for t in _study.finished(st):
            alloc = _study.trial_allocator(t)
            changed = allocators.family(alloc).changed(_study.trial_setting(t), generic)
            trials.append({"number": t.number, "allocator": alloc, "mem": t.user_attrs["mem"],
                           "perf": t.user_attrs["perf"], "feasible": _study.feasible(t),
                           "seed": t.user_attrs.get("seed"), "setting": t.user_attrs["setting"],
                           "changed": ", ".join(f"{k}={v}" for k, v in changed.items())
                                      or "nothing"})
        front = [t.number for t in _study.pareto_front(st)]
        best = _bests(db, row, st, generic)
        main = best.get("mem" if row["objective"] != "perf" else "perf")
        real = realruns.latest(db, row["name"])
        answer = None
        if real and real.get("winner"):     # the same choice `best` and `emit` make
            w, rec = _answer.validated_choices(db, st, real)
            main = {"trial": w.number, "setting": w.setting, "allocator": w.allocator,
                    "study": w.origin["study"] if w.origin else row["name"]}
            answer = rec.label()
        traces = []
        for tr in results.study_traces(db, row):
            if measure_references:
                _measure_references(db, tr, metric)
            trow = db.trace(tr.id)
            stats = _trace_stats(db, trow)
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
        study_arg = _study_arg(db, row)
        first = _first_screen(traces[0] if traces else None, main, real, generic) \
            if first_screen else None
    data = {"study": row["name"], "study_arg": study_arg, "first": first,
            "objective": row["objective"],
            "metric": metric,
            "options": opts, "hctune_version": __version__, "trials": trials, "front": front,
            "best": best, "traces": traces, "validation": real,
            "answer": answer or (main or {}).get("label")}
    data["summary"] = summary(data)
    return data


# ---- the first screen: where the answer's bytes go, and why its knobs ----

MIB = 2 ** 20


def _answer_and_base(main, real) -> tuple[dict | None, dict | None]:
    """({"label", "allocator", "setting"}) of the answer (the real runs' recommendation, else
    the replay's best) and of the best allocator as it comes to set beside it (the real runs'
    best-measured one; else glibc; glibc's rival when the answer is glibc)."""
    answer = None
    if real and (real.get("recommendation") or real.get("winner")):
        try:
            alloc, setting, rec = realruns.recommendation_setting(real)
        except HctuneError:
            alloc, setting, rec = None, None, None
        if alloc:
            answer = {"label": rec["candidate"], "allocator": alloc,
                      "setting": setting if rec["kind"] in ("tuned", "generic") else None}
    elif main:
        alloc = main.get("allocator", "hc")
        answer = {"label": f"trial {main['trial']} ({alloc}"
                           + (" tuned)" if main["setting"] else " as it comes)"),
                  "allocator": alloc, "setting": main["setting"] or None}
    if answer is None:
        return None, None
    plain = [c for c in (real or {}).get("candidates", [])
             if rule.simplicity(c) < rule.TUNED and not c.get("disqualified")
             and c["allocator"] in ("glibc", *REFERENCES) and c["candidate"] != answer["label"]
             and c["median"].get(real["measure"]) is not None]
    if plain:
        b = min(plain, key=lambda c: c["median"][real["measure"]])
        base = {"label": f"{b['allocator']} as it comes", "allocator": b["allocator"],
                "setting": None}
    elif answer["allocator"] != "glibc" or answer["setting"]:
        base = {"label": "glibc as it comes", "allocator": "glibc", "setting": None}
    else:
        base = None
    return answer, base


def _first_screen(trace, main, real, generic) -> dict | None:
    """The parts of the answer's RSS and the base's at the trace's peak, their curves, the
    headroom, and one line of why per knob that differs from generic (hctune.explain on the
    study's first trace; None when the trace is not on this machine)."""
    answer, base = _answer_and_base(main, real)
    if trace is None or answer is None or not Path(trace["path"]).is_file():
        return None
    out = {"answer": answer["label"], "entries": [], "error": None}
    for c in (answer, base):
        if c is None:
            continue
        try:
            e = _explain.run(trace["path"], c["label"], c["allocator"], c["setting"])
        except HctuneError as err:
            out["error"] = str(err)
            break
        out["entries"].append({k: e[k] for k in ("label", "allocator", "rss", "parts",
                                                 "estimated", "check_pct", "curve")})
    if out["entries"]:
        a = out["entries"][0]
        head = _explain.headroom(a)
        out["peak_rss_over_live"] = None if head is None else round(head + 1, 3)
        out["why"] = why_lines(answer, generic, trace.get("summary") or {}, out["entries"])
    return out


def _fmt_mib(n) -> str:
    return f"{n / MIB:.1f} MiB"


def why_lines(answer: dict, generic: dict, st: dict, entries: list[dict]) -> list[str]:
    """One line per knob of the answer that differs from generic (HC) or from the library's
    defaults (another allocator): what it does (its declared `why`, first sentence) and a
    figure of this trace that bears on it."""
    if not st:
        return []
    alloc, setting = answer["allocator"], answer["setting"] or {}
    fam = allocators.family(alloc)
    changed, base = fam.knob_changes(setting, generic)
    decl = fam.knobs()
    parts = entries[0]["parts"] if entries else {}
    figures = {
        "sizes": (f"{st.get('pct_small_requests', 0):.1f} % of the {st.get('requests', 0):,} "
                  f"requests are small (1 KiB or less), {st.get('distinct_sizes', 0):,} distinct "
                  f"sizes, {st.get('max_live_small_objects', 0):,} small blocks live at the peak"),
        "large": (f"{st.get('large_requests', 0):,} requests over 1 KiB "
                  f"({100 - st.get('pct_small_bytes', 100):.0f} % of the bytes asked); "
                  f"{_fmt_mib(st.get('max_live_large_bytes', 0))} of them live at the peak"),
        "free": (f"{st.get('frees', 0):,} frees for {st.get('allocations', 0):,} allocations; "
                 f"live bytes fall from {_fmt_mib(st.get('max_live_bytes', 0))} at the peak to "
                 f"{_fmt_mib(st.get('final_live_bytes', 0))} at the end"
                 + (f"; at the peak this setting keeps {_fmt_mib(parts['free_in_allocator'])} "
                    f"of free blocks and {_fmt_mib(parts['not_returned'])} of free pages"
                    if parts else "")),
        "threads": f"{st.get('threads', 1)} thread(s) allocate",
    }

    def topic(name: str, section: str) -> str:
        n, sec = name.lower(), (section or "").lower()
        if any(w in n for w in ("tcache", "arena", "remote", "thread", "narenas")):
            return "threads"
        if any(w in n for w in ("decay", "purge", "trim", "coalesce", "in_free", "empty",
                                "idle", "lazy", "release", "retain")):
            return "free"
        if any(w in n for w in ("mmap", "big", "large", "huge", "heap_unit", "top_pad")) \
                or "large" in sec:
            return "large"
        return "sizes"
    lines = []
    for name, value in changed.items():
        k = decl.get(name)
        what = (getattr(k, "why", "") or "").split(". ")[0].rstrip(".")
        was = (f"generic: {base[name]}" if name in base
               else f"{alloc}'s default: {getattr(k, 'default', '?')}")
        lines.append(f"{name} {value} ({was}): {what}. This trace: "
                     f"{figures[topic(name, getattr(k, 'section', ''))]}.")
    return lines


def _study_arg(db: Database, row) -> str:
    """How a command names this study: `--objective X` when that picks it (the latest study of
    its objective on the latest traces), else `--study NAME` (a long name, said only when
    needed)."""
    if row["objective"] in ("mem", "perf"):
        try:
            if results.study_for(db, row["objective"]) == row["name"]:
                return f"--objective {row['objective']}"
        except HctuneError:
            pass
    return f"--study {row['name']}"


def _bests(db: Database, row, st, generic: dict) -> dict:
    """The best setting for mem and for perf, each from the study that searched for it: this
    study for its own objective (both for pareto), the latest study of the other objective on
    the same traces for the other one (not this study's fastest trial: it was not looking)."""
    out = {}
    ids = json.loads(row["trace_ids"])
    for o in ("mem", "perf"):
        src_row, src = row, st
        if row["objective"] not in ("pareto", o):
            src_row = db.latest_study(o, ids)
            if src_row is None:
                continue
            try:
                _, src = _study.load(db, src_row["name"])
            except HctuneError:
                continue
        t = _study.choose(src, o)
        if t is not None:
            setting, alloc = _study.trial_setting(t), _study.trial_allocator(t)
            fam = allocators.family(alloc)
            changed = fam.changed_text(setting, generic)
            out[o] = {"trial": t.number, "study": src_row["name"], "setting": setting,
                      "allocator": alloc, "mem": t.user_attrs["mem"],
                      "perf": t.user_attrs["perf"], "seed": t.user_attrs.get("seed"),
                      "changed": changed, "label": _answer.Choice(alloc, setting, t).label()}
    return out


def _measure_references(db: Database, trace, metric: str) -> None:
    """jemalloc, mimalloc, tcmalloc (those installed) on the trace, once, when the search did not
    measure them: the page compares the tuned setting with every allocator at hand."""
    have = {m["allocator"] for m in db.measurements(trace_id=trace.id)}
    names = []
    for n in REFERENCES:
        if n in have:
            continue
        try:
            allocators.resolve(n)
        except HctuneError:
            continue            # not installed here
        names.append(n)
    if names:
        compare.compare(trace.path, names, (), rounds=1, repeat=1,
                        on_result=lambda e, r: db.add_measurement(trace.id, r["allocator"], None,
                                                                  "time", 1, r))


def _ratio_words(r: dict | None, better: str, worse: str) -> str | None:
    return rule.pct(r, better, worse, "glibc") if r else None


def summary(data: dict) -> dict:
    """The page's first lines: what to use, how much it saves, how sure (real runs when the
    study was validated, else the replay's prediction, said as such)."""
    v = data.get("validation")
    if v and v.get("recommendation"):
        rec = v["recommendation"]
        row = next(c for c in v["candidates"] if c["candidate"] == rec["candidate"])
        use = ("keep glibc" if rec["allocator"] == "glibc" and rec["kind"] != "tuned"
               else "use " + allocators.of(rec["allocator"]).answer_name(rec["candidate"]))
        saves = [w for w in (_ratio_words(row["vs_glibc"].get("peak_rss_bytes"), "smaller",
                                          "larger"),
                             _ratio_words(row["vs_glibc"].get("wall_s"), "faster", "slower"))
                 if w]
        sure = (f"{v['runs']} interleaved real runs of the program per candidate, 95 % "
                f"intervals; chosen only when significantly better than every simpler option "
                f"(validation #{v['validation_id']}, {v['date']})")
        arg = data.get("study_arg") or f"--study {data['study']}"
        emit = f"hctune emit -o malloc.c {arg}"
        if rec["kind"] == "tuned":
            emit = f"{allocators.of(rec['allocator']).emit_command} {arg}"
        elif rec["kind"] not in ("tuned", "generic"):
            emit = (f"no HC file needed (the answer is {rec['candidate']}); the best HC setting "
                    f"is still there: {emit}")
        return {"use": use, "saves": "; ".join(saves) or "nothing measurable against glibc",
                "sure": sure, "verdict": v["verdict"], "emit": emit, "validated": True}
    o = "perf" if data["objective"] == "perf" else "mem"
    b = data["best"].get(o)
    if b is None:
        return {"use": "nothing yet: no trial within the limits", "saves": "-",
                "sure": "not validated", "verdict": None, "emit": None, "validated": False}
    fam = allocators.family(b.get("allocator"))
    what = fam.headline(b["changed"])
    return {"use": f"trial {b['trial']} ({what})",
            "saves": f"footprint {b['mem']:.3f}x glibc's, {data['metric']} {b['perf']:.3f}x "
                     "glibc's in replay",
            "sure": "a prediction only (replay of the trace): not validated in real runs; "
                    f"hctune validate {data.get('study_arg') or '--study ' + data['study']}",
            "verdict": None,
            "emit": f"{fam.emit_command} " + (data.get('study_arg') or '--study ' + data['study']),
            "validated": False}


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
    """Footprint and peak RSS of each allocator over glibc's, as dots on a ratio axis around 1
    (bars from 0 hide the 1-2 % differences that matter); the legend sits below the axes."""
    glibc = next((r for r in rows if r["allocator"] == "glibc"), None)
    if glibc is None:
        return None
    series = []
    for field, label, color, marker in (("footprint_bytes", "footprint / glibc's", "#4a78b0",
                                         "o"),
                                        ("peak_rss_bytes", "peak RSS / glibc's", "#b0504a", "D")):
        if glibc.get(field):
            series.append((field, label, color, marker))
    others = [r for r in rows if r["allocator"] != "glibc"
              and any(r.get(f) for f, *_ in series)]
    if not series or not others:
        return None
    fig, ax = plt.subplots(figsize=(7, 0.38 * len(others) + 1.5))
    ys = list(range(len(others)))
    for i, (field, label, color, marker) in enumerate(series):
        pts = [(r[field] / glibc[field], y + (i - 0.5) * 0.18) for y, r in zip(ys, others)
               if r.get(field)]
        ax.scatter([p[0] for p in pts], [p[1] for p in pts], color=color, marker=marker, s=26,
                   label=label, zorder=3)
    ax.axvline(1.0, color="#888888", lw=0.8)
    ax.set_yticks(ys)
    ax.set_yticklabels([r["allocator"] for r in others], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("ratio to glibc (1.0 = the same; left of it is smaller)")
    ax.set_title("Memory per allocator on this trace (replay)", fontsize=10)
    ax.grid(axis="x", color="#eeeeee")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
    return _svg(fig)


# a search across allocators: each allocator's trials and Pareto front in its own colour
ALLOCATOR_COLOURS = {"hc": "#b0504a", "glibc": "#4a78b0", "jemalloc": "#5a9a4a",
                     "mimalloc": "#c08a30", "tcmalloc": "#8a5ab0"}


def _own_front(trials) -> list:
    """The trials (mem, perf) that no other of them dominates, by memory."""
    return sorted((t for t in trials if not any(
        (u["mem"], u["perf"]) != (t["mem"], t["perf"]) and u["mem"] <= t["mem"]
        and u["perf"] <= t["perf"] for u in trials)), key=lambda t: t["mem"])


def _front_plot(plt, trials, front, metric) -> str | None:
    if not trials:
        return None
    fig, ax = plt.subplots(figsize=(5.5, 4))
    ok = [t for t in trials if t["feasible"]]
    bad = [t for t in trials if not t["feasible"]]
    names = sorted({t.get("allocator", "hc") for t in trials})
    if len(names) > 1:
        for name in names:
            mine = [t for t in ok if t.get("allocator", "hc") == name]
            if not mine:
                continue
            colour = ALLOCATOR_COLOURS.get(name, "#666666")
            ax.scatter([t["mem"] for t in mine], [t["perf"] for t in mine], s=12,
                       color=colour, alpha=0.45)
            fr = _own_front(mine)
            ax.plot([t["mem"] for t in fr], [t["perf"] for t in fr], "o-", color=colour,
                    ms=4, label=f"{name}: trials and front")
        ok = []
    else:
        ax.scatter([t["mem"] for t in ok], [t["perf"] for t in ok], s=14, color="#9bb6d6",
                   label="trials")
    if bad:
        ax.scatter([t["mem"] for t in bad], [t["perf"] for t in bad], s=14, marker="x",
                   color="#999999", label="over a limit")
    if len(names) == 1:
        fr = sorted((t for t in trials if t["number"] in front), key=lambda t: t["mem"])
        ax.plot([t["mem"] for t in fr], [t["perf"] for t in fr], "o-", color="#b0504a", ms=4,
                label="Pareto front")
    ax.axvline(1.0, color="#cccccc", lw=0.8)
    ax.axhline(1.0, color="#cccccc", lw=0.8)
    ax.set_xlabel("footprint / glibc")
    ax.set_ylabel(f"{metric} / glibc")
    ax.set_title("Footprint and speed of every trial")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
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
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
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
        chosen = (v.get("recommendation") or v.get("winner") or {}).get("candidate")
        colors = ["#b0504a" if c["candidate"] == chosen
                  else "#4a78b0" for c in rows]
        ax.errorbar(x, ys, xerr=err, fmt="none", ecolor="#555555", capsize=3, lw=1)
        ax.scatter(x, ys, color=colors, zorder=3, label="real (median, 95 % CI)")
        pred = [(c["replay"] or {}).get(rk) for c in rows]
        py = [y + 0.2 for y, p in zip(ys, pred) if p is not None]
        ax.scatter([p for p in pred if p is not None], py, facecolors="none",
                   edgecolors="#333333", marker="D", s=22,
                   label="replay prediction" + (" (footprint)" if rk == "mem_ratio" else ""))
        ax.axvline(1.0, color="#888888", lw=0.8)
        ax.set_title(title, fontsize=9)
        ax.grid(axis="x", color="#eeeeee")
    axes[0].set_yticks(ys)
    axes[0].set_yticklabels([c["candidate"] for c in rows], fontsize=8)
    axes[0].invert_yaxis()
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=7, loc="lower center", ncol=2, frameon=False,
               bbox_to_anchor=(0.5, -0.02 - 0.3 / max(1, len(rows))))
    prog = " ".join(v["program"]["argv"])[:80]
    fig.suptitle(f"Real runs ({v['runs']} each, interleaved): {prog}",
                 fontsize=9)
    return _svg(fig)


PART_COLORS = {"live": "#4a78b0", "internal_fragmentation": "#8fb0d8",
               "free_in_allocator": "#e0a040", "metadata": "#b0504a",
               "not_returned": "#d8c070", "other": "#bbbbbb"}


def _parts_plot(plt, first) -> str | None:
    """The stacked bar of the parts at the peak (MiB), the answer first, the base below it."""
    entries = (first or {}).get("entries") or []
    if not entries:
        return None
    fig, ax = plt.subplots(figsize=(8, 0.32 * len(entries) + 1.0))
    ys = list(range(len(entries)))
    left = [0.0] * len(entries)
    for k in _explain.PARTS:
        w = [e["parts"][k] / MIB for e in entries]
        ax.barh(ys, w, left=left, color=PART_COLORS[k], label=k.replace("_", " "),
                edgecolor="white", height=0.7)
        left = [a + b for a, b in zip(left, w)]
    for y, e in zip(ys, entries):
        ax.text(e["rss"] / MIB, y, f" RSS {e['rss'] / MIB:.1f} MiB", va="center", fontsize=8)
    ax.set_yticks(ys)
    ax.set_yticklabels([e["label"] for e in entries], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("MiB at the trace's peak (replay)")
    ax.set_xlim(0, max(e["rss"] for e in entries) / MIB * 1.25)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
    ax.set_title("Where the bytes go at the peak", fontsize=9)
    return _svg(fig)


def _timeline_plot(plt, first) -> str | None:
    """Live bytes against each candidate's RSS (less the replay's own memory) over the run."""
    entries = (first or {}).get("entries") or []
    if not entries or not entries[0]["curve"]:
        return None
    fig, ax = plt.subplots(figsize=(8, 2.6))
    c0 = entries[0]["curve"]
    ax.plot([p["op"] for p in c0], [p["live"] / MIB for p in c0], color="#333333", lw=1.4,
            label="live (the program's)")
    for e, color in zip(entries, ("#b0504a", "#4a78b0", "#e0a040")):
        other = e["parts"]["other"]
        ax.plot([p["op"] for p in e["curve"]],
                [max(0, p["rss"] - other) / MIB for p in e["curve"]], color=color, lw=1.1,
                label=f"RSS, {e['label']}")
    ax.set_xlabel("allocation events")
    ax.set_ylabel("MiB")
    ax.set_title("Timeline: live bytes and RSS (less the replay's own memory)", fontsize=9)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
    return _svg(fig)


def human_size(n) -> str:
    """Bytes as B, KiB, MiB or GiB with three significant digits or so."""
    if n is None:
        return ""
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} B" if unit == "B" else f"{n:.{1 if abs(n) < 100 else 0}f} {unit}"
        n /= 1024
    return ""


def render(data: dict) -> str:
    plt = _plt()
    figures = {"parts": _parts_plot(plt, data.get("first")),
               "timeline": _timeline_plot(plt, data.get("first")),
               "real": _real_plot(plt, data.get("validation")),
               "front": _front_plot(plt, data["trials"], data["front"], data["metric"]),
               "history": _history_plot(plt, data["trials"], data["objective"]),
               "traces": [{"sizes": _hist_plot(plt, t["size_histogram"]),
                           "live": _live_plot(plt, t["live_bytes"]),
                           "allocators": _alloc_plot(plt, t["allocators"])}
                          for t in data["traces"]]}
    blob = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    blob = blob.replace("</", "<\\/")  # cannot close the <script> it sits in
    return templating.render("report.html.j2", data=data, figures=figures, data_json=blob,
                             size=human_size,
                             title=f"hctune report: {data['study']}", version=__version__)


def report(db_path, out, name: str | None = None, objective: str | None = None) -> dict:
    out = Path(out)
    if out.is_dir():
        raise HctuneError(f"-o {out} is a directory; name the file, e.g. -o {out}/report.html")
    data = collect(db_path, name, objective)
    write_atomic(out, render(data))
    return {"report": str(out), "study": data["study"], "trials": len(data["trials"])}
