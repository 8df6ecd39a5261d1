"""hctune stats [TRACE] [--json] [--html FILE] [--png FILE]: what the trace says about the heap."""

import json

import click

from hctune.files import write_atomic
from hctune.trace.stats import stats


def _progress():
    """progress(done, total) for a big trace: a line on stderr at every tenth of the events
    read (a terminal or a log alike), so 20 s on 24 M events is never silent."""
    shown = [0]

    def progress(done, total):
        tenth = 10 * done // max(total, 1)
        if tenth > shown[0]:
            shown[0] = tenth
            click.echo(f"stats: {done:,} of {total:,} events read ({10 * tenth} %)", err=True)
    return progress


@click.command("stats")
@click.argument("trace", required=False, type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the statistics as JSON.")
@click.option("--html", "html_out", type=click.Path(dir_okay=False), help="Write an HTML page.")
@click.option("--png", "png_out", type=click.Path(dir_okay=False), help="Write the plots as PNG.")
@click.pass_context
def command(ctx, trace, as_json, html_out, png_out):
    """Sizes, small/large requests, max live bytes and objects (Hasan & Chang 2006, Tables 1,
    3, 4) and the allocation graph of TRACE (default: the latest profiled trace)."""
    if trace is None:
        from hctune.db import Database      # deferred: SQLAlchemy, only when the database is read
        from hctune.trace import register   # deferred: imports hctune.db (SQLAlchemy)
        with Database(ctx.obj["db_path"]) as db:
            trace = str(register.local_path(db, register.latest(db)))
    st = stats(trace, progress=_progress())
    from hctune.trace import report  # deferred: Jinja2, only when the command runs
    if html_out:
        write_atomic(html_out, report.html(st, trace))
    if png_out:
        from hctune.trace import plots   # matplotlib is slow to import: only when used
        write_atomic(png_out, plots.png_bytes(st))
    click.echo(json.dumps(st, indent=1, sort_keys=True) if as_json else report.text(st, trace))
