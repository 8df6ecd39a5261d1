"""`hctune report`: an HTML page about a study (plots inline, data embedded as JSON)."""

from __future__ import annotations

import click

from hctune import report as _report


@click.command("report")
@click.option("--study", "study_name", default=None, help="Study name (default: the latest).")
@click.option("--objective", type=click.Choice(["mem", "perf", "pareto"]), default=None,
              help="Without --study: the latest study of this objective on the latest traces.")
@click.option("-o", "--output", default="report.html", show_default=True,
              type=click.Path(), help="The HTML file to write.")
@click.pass_context
def command(ctx, study_name, objective, output):
    """Write an HTML report of a study: trace plots, allocators, Pareto front, history."""
    r = _report.report(ctx.obj["db_path"], output, study_name, objective)
    click.echo(f"wrote {r['report']} (study {r['study']}, {r['trials']} trials)")
