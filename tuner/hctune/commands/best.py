"""`hctune best`: the setting a study chose, with its numbers against glibc and generic."""

from __future__ import annotations

import json

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from hctune import allocators
from hctune.commands import _console
from hctune.commands._console import setting_text
from hctune.search import results


def _fmt_bytes(n):
    if n is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


def _fmt(v, spec=".2f"):
    return "-" if v is None else format(v, spec)


def show(r: dict, console: Console):
    perf = "instructions_per_op" if r["metric"] == "instructions" else "time_ns_per_op"
    who = f"trial {r['trial']}" if r["trial"] is not None else "the generic setting"
    if r["trial"] is not None and r.get("trial_study", r["study"]) != r["study"]:
        who = f"the study {r['trial_study']}'s trial {r['trial']}"
    seed = escape(f" (seed: {r['seed']})") if r["seed"] else ""
    answer = (r.get("answer") or {}).get("label")
    if r["chosen_by"] == "real runs" and answer:
        # the verdict's answer first (it can be glibc or another allocator), then HC's best
        console.print(f"study [bold]{escape(r['study'])}[/] ({r['study_objective']}), answer "
                      f"for [bold]{r['objective']}[/]: {escape(answer)}, chosen by real runs "
                      f"(the replay's best: trial {r['replay_best_trial']})", soft_wrap=True)
        if r["answer"]["allocator"] != r.get("allocator", "hc") or \
                r["answer"]["trial"] != r["trial"]:
            console.print(f"HC's best (what malloc.c holds; the tables measure it): {who}{seed}",
                          soft_wrap=True)
    else:
        console.print(f"study [bold]{escape(r['study'])}[/] ({r['study_objective']}), best for "
                      f"[bold]{r['objective']}[/]: {who}{seed}"
                      + (", chosen by real runs (the replay's best: trial "
                         f"{r['replay_best_trial']})" if r["chosen_by"] == "real runs"
                         else ", chosen by the replay (not validated: hctune validate)"))
    if r.get("note"):
        console.print(escape(f"note: {r['note']}"))
    changed = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                        for k, v in r["changed_from_generic"].items()) or "none"
    console.print(escape(allocators.family(r.get("allocator")).best_line(r["setting"], changed)))
    if r.get("fitted_classes"):
        console.print(escape(f"size classes: {r['fitted_classes']}"))
    if r.get("per_allocator"):
        t = Table(title="each allocator's best in the search (replay, x glibc)",
                  title_justify="left")
        for col in ("allocator", "memory", "time", "its defaults", "trial",
                    "what differs from generic"):
            t.add_column(col, justify="right" if col in ("memory", "time", "its defaults",
                                                         "trial") else "left",
                         overflow="fold", no_wrap=False,
                         ratio=1 if col.startswith("what") else None)
        for a in r["per_allocator"]:
            d = (f"{a['defaults_mem_ratio']:.3f}, {a['defaults_perf_ratio']:.3f}"
                 if a["defaults_mem_ratio"] is not None else "-")
            t.add_row(a["allocator"], f"{a['mem_ratio']:.3f}", f"{a['perf_ratio']:.3f}", d,
                      str(a["trial"]), escape(setting_text(a["allocator"], a["setting"])))
        console.print(t)
    for e in r["traces"]:
        t = Table(title=escape(e["command"] or e["trace"]), title_justify="left")
        for col in ("", "footprint", "vs glibc", "vs generic", perf.replace("_", " "),
                    "vs glibc", "vs generic"):
            t.add_column(col, justify="right" if col else "left", overflow="fold")
        for who in ("tuned", "generic", "glibc"):
            n = e[who]
            fp_g = n["footprint_bytes"] / e["glibc"]["footprint_bytes"] \
                if n["footprint_bytes"] and e["glibc"]["footprint_bytes"] else None
            fp_n = n["footprint_bytes"] / e["generic"]["footprint_bytes"] \
                if n["footprint_bytes"] and e["generic"]["footprint_bytes"] else None
            p_g = n[perf] / e["glibc"][perf] if n[perf] and e["glibc"][perf] else None
            p_n = n[perf] / e["generic"][perf] if n[perf] and e["generic"][perf] else None
            t.add_row(who, _fmt_bytes(n["footprint_bytes"]), _fmt(fp_g), _fmt(fp_n),
                      _fmt(n[perf]), _fmt(p_g), _fmt(p_n))
        console.print(t)
    t = r.get("tradeoff")
    if t:
        u, c, lim = t["unconstrained"], t["chosen"], t["limits"]
        mem = r.get("memory", "footprint")

        def figures(x, vs=""):     # peak RSS once when it is also what mem compares
            rss = "" if mem == "peak RSS" else f", peak RSS {_fmt(x['rss_ratio'], '.3f')}x"
            return f"time {x['perf_ratio']:.3f}x{vs}, {mem} {x['mem_ratio']:.3f}x{rss}"
        limits = ", ".join(f"{k.replace('_', '-')} {v:g} %" for k, v in lim.items()
                           if v is not None)
        console.print(escape(
            f"trade-off ({limits}): the fastest/smallest trial without limits is trial "
            f"{u['trial']}: {figures(u, ' glibc')}; the chosen trial {c['trial']}: "
            f"{figures(c)} (replay). Lift with --max-memory-overhead none."))
    if r.get("validation"):
        _console.show(r["validation"], console)
    if len(r["traces"]) > 1:
        g = r["geomean"]
        console.print(f"geometric mean, tuned vs glibc: footprint {_fmt(g['glibc']['footprint'])}"
                      f"x, {perf} {_fmt(g['glibc'][perf])}x; vs generic: footprint "
                      f"{_fmt(g['generic']['footprint'])}x, {perf} {_fmt(g['generic'][perf])}x")


@click.command("best")
@click.option("--study", "study_name", default=None, help="Study name (default: the latest).")
@click.option("--objective", type=click.Choice(["mem", "perf"]), default=None,
              help="Which best (default: the study's objective; mem for a pareto study).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def command(ctx, study_name, objective, as_json):
    """Show the best setting of a study: footprint and time, against glibc and generic."""
    r = results.best(ctx.obj["db_path"], study_name, objective)
    if as_json:
        click.echo(json.dumps(r, indent=2, sort_keys=True))
    else:
        show(r, Console())
