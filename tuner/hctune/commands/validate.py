"""hctune validate [--study NAME] [--top K] [--runs N] [--json] [-- PROGRAM ARGS...]: the study's
best settings, generic HC and the other allocators in real runs of the program."""

from __future__ import annotations

import json

import click
from rich.console import Console

from hctune import validate as _validate
from hctune.commands._console import progress_bar, show, table  # noqa: F401 (their old home)
from hctune.commands.profile import server_load, server_options


@click.command("validate", context_settings={"ignore_unknown_options": True})
@click.option("--study", "study_name", default=None, help="Study name (default: the latest).")
@click.option("--objective", type=click.Choice(["mem", "perf", "pareto"]), default=None,
              help="Without --study: the latest study of this objective on the latest traces.")
@click.option("--top", type=int, default=_validate.DEFAULT_TOP, show_default=True,
              help="How many of the study's best distinct settings (pareto: along the front).")
@click.option("--runs", type=int, default=_validate.DEFAULT_RUNS, show_default=True,
              help=f"Runs per candidate, interleaved (at least {_validate.MIN_RUNS}).")
@click.option("--max-memory-overhead", type=float, default=None, metavar="PCT",
              help="perf/pareto: the winner's peak RSS at most PCT % over glibc's (default: the "
                   f"study's limit, else {_validate.DEFAULT_MEMORY_OVERHEAD:g} % over the larger "
                   "of glibc's and generic HC's).")
@click.option("--references/--no-references", default=True, show_default=True,
              help="Also run jemalloc, mimalloc and tcmalloc when installed.")
@click.option("--lib", "libs", multiple=True, metavar="NAME=PATH",
              help="Also run this malloc library (repeatable), e.g. an emitted .so.")
@click.option("--timeout", type=float, default=None,
              help="Seconds before a run counts as hung (default: 20x the warm-up, at least 60).")
@click.option("--memory-measure", type=click.Choice(("peak", "mean", "final")), default=None,
              help="mem: choose on the runs' peak RSS, or the mean or final RSS of their RSS "
                   "curve (sampled every 5 ms); default: the study's --memory-measure.")
@click.option("--time-measure", type=click.Choice(tuple(_validate.TIME_MEASURES)), default="wall",
              show_default=True,
              help="perf/pareto: choose on the wall time, or on the program's user + sys CPU "
                   "time (steadier than wall time when other work loads the machine).")
@click.option("--min-effect", type=float, default=_validate.rule.MIN_EFFECT, show_default=True,
              metavar="PCT",
              help="The smallest gain worth acting on: a significant gain under PCT % keeps the "
                   "simpler option (docs/validate.md, 'The minimum effect').")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@server_options
@click.argument("program", nargs=-1, type=click.UNPROCESSED)
@click.pass_context
def command(ctx, study_name, objective, top, runs, max_memory_overhead, references, libs, timeout,
            memory_measure, time_measure, min_effect, as_json, load, ready, ready_timeout, stop_sig, warmup,
            program):
    """Run the real program under the study's best settings, generic HC, glibc and the others.

    The program is the profiled command (same arguments, directory and stdin file) unless
    given after `--`, e.g. `hctune validate -- ./app other-input` to check the setting on an
    input it was not tuned on. A candidate whose output or exit status differs from glibc's, or
    that crashes, is disqualified. The winner is what `best`, `emit` and `report` then use.
    """
    extra = []
    for item in libs:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise click.UsageError(f"--lib takes NAME=PATH, not {item!r}")
        extra.append((name, path))
    server = server_load(load, ready, ready_timeout, stop_sig, warmup)
    prog, progress = progress_bar(Console(stderr=True))
    with prog:
        s = _validate.run(ctx.obj["db_path"], _validate.ValidateOptions(
            study=study_name, objective=objective, top=top, runs=runs,
            argv=list(program) or None, references=references, extra=tuple(extra),
            memory_limit=max_memory_overhead, timeout=timeout, memory_measure=memory_measure,
            time_measure=time_measure, server=server.to_dict() if server else None,
            min_effect=min_effect), progress)
    if as_json:
        click.echo(json.dumps(s, indent=2, sort_keys=True))
    else:
        show(s, Console())
