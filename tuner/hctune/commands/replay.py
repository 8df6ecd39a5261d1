"""hctune replay [TRACE] [--allocator A] [--preset P | --set KNOB=VALUE ...] [--repeat N]
[--metric time|instructions] [--threads auto|off] [--json]:
one allocator on one trace, stored in the database."""

import json

import click

from hctune import allocators, replay
from hctune.db import Database
from hctune.trace import register


@click.command("replay")
@click.argument("trace", required=False, type=click.Path(dir_okay=False))
@click.option("--allocator", "-a", default="hc", show_default=True,
              help="hc, glibc, jemalloc, mimalloc, tcmalloc, kingsley, or a malloc .so path.")
@click.option("--preset", "-p", help="HC: a named setting from configs/presets.toml.")
@click.option("--set", "sets", multiple=True, metavar="KNOB=VALUE",
              help="Override a knob: HC's (QL_HIGH=128) or the allocator's own "
                   "(jemalloc.narenas=1; configs/allocators.toml).")
@click.option("--repeat", "-n", default=5, show_default=True, type=click.IntRange(1, 1000),
              help="Replays in one process (median time reported).")
@click.option("--metric", type=click.Choice(replay.METRICS), default="time", show_default=True,
              help="instructions: also count the loop's instructions under callgrind.")
@click.option("--no-touch", is_flag=True, help="Do not write one byte per page of new blocks.")
@click.option("--threads", type=click.Choice(replay.THREAD_MODES), default="auto",
              show_default=True, help="auto: replay a multi-threaded trace on threads (wall "
              "time); off: on one thread in recorded order.")
@click.option("--json", "as_json", is_flag=True, help="Print the full result as JSON.")
@click.pass_context
def command(ctx, trace, allocator, preset, sets, repeat, metric, no_touch, threads, as_json):
    """Replay TRACE (default: the latest profiled trace) against one allocator in the replay
    harness (Hasan & Chang 2006, §4.4): time per operation, peak memory, HC's footprint."""
    setting = allocators.parse_setting(allocator, preset, sets)
    with Database(ctx.obj["db_path"]) as db:
        row = register.latest(db) if trace is None else None
        if row is not None:
            trace = register.local_path(db, row)
        result = replay.measure(trace, allocator, setting, repeat=repeat, metric=metric,
                                touch=not no_touch, db=db, threads=threads)
        tid = (row or register.named(db, trace))["id"]
        db.add_measurement(tid, result["allocator"],
                           allocators.setting_key(allocator, setting),
                           metric, repeat, result)
    if as_json:
        click.echo(json.dumps(result, indent=1, sort_keys=True))
        return
    click.echo(replay.summary(result))
