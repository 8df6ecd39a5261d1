"""hctune compare [TRACE] [--allocators glibc,jemalloc,...] [--presets generic,...] [--repeat N]
[--threads auto|off] [--json]: Hasan & Chang 2006 Tables 8 and 9 for one trace, stored in the
database."""

import json

import click

from hctune import allocators, compare, replay
from hctune.db import Database
from hctune.trace import register


@click.command("compare")
@click.argument("trace", required=False, type=click.Path(dir_okay=False))
@click.option("--allocators", "names", default=",".join(compare.DEFAULT_ALLOCATORS),
              show_default=True, help="Comma-separated baselines (or malloc .so paths).")
@click.option("--presets", default=",".join(compare.DEFAULT_PRESETS), show_default=True,
              help="Comma-separated HC presets from configs/presets.toml ('' for none).")
@click.option("--repeat", "-n", "rounds", default=5, show_default=True,
              type=click.IntRange(1, 100), help="Interleaved rounds (A B C A B C ...).")
@click.option("--inner", default=3, show_default=True, type=click.IntRange(1, 100),
              help="Replays inside each run; the run reports their median.")
@click.option("--threads", type=click.Choice(replay.THREAD_MODES), default="auto",
              show_default=True, help="auto: replay a multi-threaded trace on threads (wall "
              "time); off: on one thread in recorded order.")
@click.option("--set", "sets", multiple=True, metavar="ALLOCATOR.KNOB=VALUE",
              help="Also that allocator with these knobs (configs/allocators.toml), e.g. "
                   "jemalloc.dirty_decay_ms=0 (repeatable; one row per allocator named).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_context
def command(ctx, trace, names, presets, rounds, inner, threads, sets, as_json):
    """Memory and time of each allocator on TRACE (default: the latest profiled trace),
    absolute and normalised to glibc, measured interleaved so drift hits all alike."""
    from rich.console import Console  # deferred: rich, only when the command runs
    from rich.progress import Progress  # deferred: (as above)

    # the default list leaves out allocators that are not installed (and says so); named ones
    # must be there
    default = ctx.get_parameter_source("names") == click.core.ParameterSource.DEFAULT
    optional = tuple(allocators.SYSTEM) if default else ()
    with Database(ctx.obj["db_path"]) as db:
        row = register.latest(db) if trace is None else None
        if row is not None:
            trace = register.local_path(db, row)
        tid = None if row is None else row["id"]

        def store(entry, result):
            nonlocal tid
            if tid is None:
                tid = register.named(db, trace)["id"]
            db.add_measurement(tid, result["allocator"],
                               allocators.setting_key(entry["allocator"], entry["setting"]),
                               "time", inner, result)

        with Progress(transient=True, disable=as_json) as bar:
            task = bar.add_task("comparing", total=None)

            def progress(done, total, label):
                bar.update(task, completed=done, total=total, description=label)

            result = compare.compare(trace, allocators.parse_list(names),
                                     allocators.parse_list(presets), rounds=rounds,
                                     repeat=inner, progress=progress, on_result=store,
                                     threads=threads, optional=optional, sets=sets)
    for note in result["skipped"]:
        click.echo(f"hctune: note: {note}", err=True)
    if as_json:
        click.echo(json.dumps(result, indent=1, sort_keys=True))
    else:
        Console().print(compare.table(result))
