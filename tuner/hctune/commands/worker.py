"""`hctune worker`: run the studies `hctune serve` queued (a thin layer over hctune.jobs.runner)."""

from __future__ import annotations

import signal
import sys

import click

from hctune.jobs import runner as _worker


@click.command("worker")
@click.option("--storage", envvar="HCTUNE_STORAGE", default=None,
              help="Optuna storage URL (default: the --db database); the same as the server's.")
@click.option("--once", is_flag=True, help="Stop when the queue is empty.")
@click.pass_context
def command(ctx, storage, once):
    """Take queued studies and run their trials, until interrupted."""
    from hctune.search.storage import default_url, open_storage  # deferred: Optuna
    open_storage(storage or default_url(ctx.obj["db_path"]))   # a bad URL: one line, now
    # SIGTERM (`serve` stopping its local workers, a service manager) ends the loop as Ctrl-C
    # does: the worker's row says "stopped" (the /workers page), not dead
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    _worker.loop(ctx.obj["db_path"], storage, once=once,
                 log=lambda m: click.echo(m, err=True))
