"""`hctune studies`: the studies of the database, each with its trace, objective, trials, best
and the verdict of its latest validation (`--json` for scripts)."""

from __future__ import annotations

import json

import click

from hctune import text
from hctune.search import listing


def _best(b: dict, memory: str) -> str:
    parts = [f"{o}: trial {e['trial']} ({memory} {e['mem_ratio']:.3f}x glibc, time "
             f"{e['perf_ratio']:.3f}x)" for o, e in b.items()]
    return "; ".join(parts) or "none within the limits"


def show(rows: list[dict]) -> None:
    """One block per study, plain lines (they wrap, never clip, in a pipe or a CI log)."""
    if not rows:
        click.echo("no study yet: hctune search --objective mem|perf")
        return
    for r in rows:
        traces = ", ".join(f"#{t['id']}" + (f" ({text.command(t['command'])})"
                                            if t["command"] else "")
                           for t in r["traces"])
        click.echo(f"{r['name']}")
        click.echo(f"  {r['objective']} on trace {traces}; created {r['created']}")
        if r["error"]:
            click.echo(f"  cannot open: {r['error']}")
        else:
            click.echo(f"  {r['trials']} finished trials ({r['failed']} failed, {r['feasible']} "
                       f"within the limits); best in replay: "
                       f"{_best(r['best'], r.get('memory') or 'memory')}")
            if r.get("note"):
                click.echo(f"  {r['note']}")
        v = r["validation"]
        click.echo(f"  validated (#{v['id']}, {v['runs']} runs): {v['verdict']}" if v
                   else f"  not validated: hctune validate --study {r['name']}")


@click.command("studies")
@click.option("--objective", type=click.Choice(["mem", "perf", "pareto"]), default=None,
              help="Only the studies of this objective.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (a list, oldest first).")
@click.pass_context
def command(ctx, objective, as_json):
    """List the studies: trace, objective, trials, best, and the validated verdict.

    Any of them can be named with --study in best, emit, validate and report; or pick the
    latest of an objective on the latest traces with --objective.
    """
    rows = [r for r in listing.studies(ctx.obj["db_path"])
            if objective is None or r["objective"] == objective]
    if as_json:
        click.echo(json.dumps(rows, indent=2, sort_keys=True))
    else:
        show(rows)
