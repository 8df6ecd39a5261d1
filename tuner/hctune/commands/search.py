"""`hctune search`: tune HC to one or more traces with Optuna (a thin layer over hctune.search)."""

from __future__ import annotations

import json
import time

import click
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from hctune import allocators
from hctune.errors import HctuneError
from hctune import validate as _validate
from hctune.commands import _console
from hctune.search import objective as _obj
from hctune.search import options as _options
from hctune.search import study as _study


class _NoBar:
    def start(self):
        pass

    def stop(self):
        pass


def _bar(opts: _options.Options, console: Console):
    """(bar, progress callback): a rich bar on a terminal; without one (a pipe, a CI log) a
    plain line per finished trial instead."""
    lines = not console.is_terminal
    prog = Progress(TextColumn("[bold]search[/]"), BarColumn(), MofNCompleteColumn(),
                    TextColumn("{task.fields[best]}"), TextColumn("{task.fields[left]}"),
                    TimeElapsedColumn(), console=console, transient=False)
    task = prog.add_task("search", total=opts.trials, best="", left="")

    def update(st, done, target, started, failed):
        if failed is not None:
            console.print(f"trial {failed[0]} failed: {escape(failed[1])}", soft_wrap=lines)
        s = _study.summary(st, opts.objective)
        if opts.objective == "pareto":
            best = f"front {len(s['front'])}"
        else:
            b = s.get(f"best_{opts.objective}")
            best = f"best {b[opts.objective + '_ratio']:.4f}x glibc" if b else "best -"
        elapsed = time.monotonic() - started
        acc = s["trials"]
        ran = acc["trials"] - update.first_evaluated
        # (not in the first second: a resumed study with nothing left to run has no rate)
        rate = f"{ran / elapsed * 60:.1f} trials/min" if elapsed >= 1.0 and ran > 0 else ""
        left = []
        if opts.timeout is not None:
            left.append(max(0.0, opts.timeout - elapsed))
        if target is not None and done > 0 and elapsed > 0:
            ran = max(1, done - update.first)
            left.append(elapsed / ran * max(0, target - done))
        if lines:
            console.print(f"search: {done}/{target if target is not None else '?'} trials "
                          f"({acc['seeds']} seeds, {acc['sampled']} sampled, "
                          f"{acc['pruned']} pruned, {acc['failed']} failed), "
                          + (f"{rate}, " if rate else "") + f"{best}"
                          + (f", ~{min(left):.0f}s left" if left else ""))
            console.file.flush()
            return
        prog.update(task, completed=done, best=best + (f", {rate}" if rate else ""),
                    left=f"~{min(left):.0f}s left" if left else "")

    update.first = None
    update.first_evaluated = 0
    if lines:
        prog = _NoBar()

    def first_call(st, done, target, started, failed):
        if update.first is None:
            update.first = done - 1 if done else 0
            # trials of earlier runs do not count in this run's rate
            update.first_evaluated = max(0, _study.accounting(st)["trials"] - 1)
        update(st, done, target, started, failed)
    return prog, first_call


def _allocator_list(text: str, notice) -> tuple[str, ...]:
    names = allocators.parse_list(text)
    if not names:
        raise click.UsageError("--allocators needs at least one name")
    try:
        return _study.expand_allocators(names, notice)
    except HctuneError as e:
        raise click.UsageError(str(e)) from None


@click.command("search")
@click.argument("traces", nargs=-1, type=click.Path(dir_okay=False))
@click.option("--objective", type=click.Choice(_obj.OBJECTIVES),
              default=_options.default("objective"), show_default=True,
              help="mem: least footprint; perf: least time; pareto: keep the front of both.")
@click.option("--trials", type=int, default=None,
              help=f"Trials the study should hold, finished or pruned as lost (default "
                   f"{_options.DEFAULT_TRIALS}, or until --timeout; a re-run resumes).")
@click.option("--timeout", type=float, default=None, help="Stop after this many seconds.")
@click.option("--jobs", default="auto", show_default=True, metavar="N|auto",
              help="Trials run in parallel; auto: one per core when only memory is measured "
                   "(--objective mem), one at a time when time is (replays side by side slow "
                   "each other down).")
@click.option("--study", "study_name", default=None,
              help="Study name (default: made from the traces, objective, metric and limits).")
@click.option("--storage", default=None,
              help="Optuna storage URL (default: the --db SQLite file); postgresql://... lets "
                   "several machines share one study.")
@click.option("--max-memory-overhead", default=None, metavar="PCT|none",
              help="Constraint: peak RSS at most PCT % over glibc's on every trace. perf "
                   f"without it: at most {_obj.DEFAULT_PERF_MEMORY_OVERHEAD:g} % over the "
                   "larger of glibc's and generic HC's; 'none' lifts it.")
@click.option("--max-slowdown", type=float, default=None, metavar="PCT",
              help="Constraint: time (or instructions) at most PCT % over glibc on every trace; "
                   "validate keeps it for mem (median wall time of the real runs).")
@click.option("--metric", type=click.Choice(_obj.METRICS), default=_options.default("metric"),
              show_default=True,
              help="What perf measures: CPU time, or instructions (deterministic).")
@click.option("--repeat", type=int, default=_options.default("repeat"), show_default=True,
              help="Replays per measurement (the median is kept).")
@click.option("--seed", type=int, default=None, help="Sampler seed (reproducible search).")
@click.option("--allocators", "allocator_list", default=",".join(_options.DEFAULT_ALLOCATORS),
              show_default=True,
              metavar="hc,glibc,jemalloc,...",
              help="Allocators to search across, each with its own knobs (configs/"
                   "allocators.toml); 'installed': HC and every one installed; 'hc': HC "
                   "alone (its footprint, the paper's measure).")
@click.option("--memory-measure", type=click.Choice(("peak", "final", "mean")),
              default=_options.default("memory_measure"),
              show_default=True,
              help="What mem minimises: the peak RSS; mean: the mean of the RSS curve (what a "
                   "long-running program pays for on average); final: the RSS left once the "
                   "blocks are freed (where decay knobs show). Validation then chooses on the "
                   "real runs' same figure.")
@click.option("--validate", "do_validate", is_flag=True,
              help="Then run the real program under the best settings (hctune validate).")
@click.option("--validate-runs", type=int, default=_options.VALIDATE_RUNS, show_default=True,
              help="With --validate: runs per candidate.")
@click.option("--validate-top", type=int, default=_options.VALIDATE_TOP, show_default=True,
              help="With --validate: how many of the best settings.")
@click.option("--fidelity", type=click.Choice(("auto", "whole")), default="auto",
              show_default=True,
              help="auto: in a peak-memory study whose trace peaks in its first half, each "
                   "sampled setting is replayed through the peak first and only the best third "
                   "on the whole (docs/search.md); whole: every trial on the whole.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.pass_context
def command(ctx, traces, objective, trials, timeout, jobs, study_name, storage,
            max_memory_overhead, max_slowdown, metric, repeat, seed, allocator_list,
            memory_measure, do_validate, validate_runs, validate_top, fidelity, as_json):
    """Search the allocators' knobs for the TRACES (default: the latest profile).

    By default HC and every other allocator installed (glibc, jemalloc, mimalloc, tcmalloc),
    each with its own knobs. Seeds the study with each allocator as it comes, the advice its
    documents give, and the paper's HC settings (Hasan & Chang 2006, Tables 6, 7 and the §5.2
    guideline), then lets Optuna search. Several traces: the geometric mean of the ratios to
    glibc is minimised. Interrupted? Run the same command again to resume.
    """
    console = Console(stderr=True)
    if study_name is not None and ("/" in study_name or not study_name.strip()):
        # (the service's addresses hold the name: /studies/NAME would not reach it)
        raise HctuneError(f"--study {study_name!r}: a name without '/', not empty")
    try:
        jobs = _options.parse_jobs(jobs, time_matters=objective != "mem"
                                   or max_slowdown is not None)
    except HctuneError as e:
        raise click.UsageError(str(e)) from None
    limit, limit_default = _study.parse_memory_limit(max_memory_overhead)
    if trials is None and timeout is None:
        trials = _options.DEFAULT_TRIALS
    opts = _options.Options(objective=objective, metric=metric, trials=trials, timeout=timeout,
                            jobs=jobs, study=study_name, storage=storage,
                            max_memory_overhead=limit, max_slowdown=max_slowdown,
                            seed=seed, repeat=repeat, memory_limit_default=limit_default,
                            validate_runs=validate_runs if do_validate else 0,
                            validate_top=validate_top,
                            allocators=_allocator_list(
                                allocator_list,
                                lambda line: click.echo(f"hctune: {line}", err=True)),
                            memory_measure=memory_measure, fidelity=fidelity)
    if do_validate and validate_runs < _options.VALIDATE_MIN_RUNS:  # before the search
        raise click.UsageError(f"--validate-runs must be at least {_options.VALIDATE_MIN_RUNS}")
    prog, update = _bar(opts, console)
    started = []

    def progress(*a):
        if not started:            # drawn at the first finished trial: a search that fails
            started.append(prog)   # before one (a bad trace, no compiler) draws no bar
            prog.start()
        update(*a)
    try:
        result = _study.run(ctx.obj["db_path"], traces, opts, progress=progress,
                            notice=lambda line: click.echo(f"hctune: {line}", err=True))
    finally:
        if started:
            prog.stop()
    if do_validate:
        vprog, vupdate = _console.progress_bar(console)
        with vprog:
            result["validation"] = _validate.run(ctx.obj["db_path"], _validate.ValidateOptions(
                study=result["study"], top=opts.validate_top, runs=opts.validate_runs), vupdate)
    if as_json:
        click.echo(json.dumps(result, indent=2, sort_keys=True))
        return
    acc = result["trials"]
    click.echo(f"study {result['study']}: {result['finished']} finished trials "
               f"({result['failed']} failed, {result['feasible']} within the limits)")
    click.echo(f"trials: {acc['trials']} = {acc['seeds']} seeds + {acc['sampled']} sampled + "
               f"{acc['pruned']} pruned + {acc['failed']} failed"
               + (f" ({acc['stopped']} of the pruned stopped at the --timeout deadline)"
                  if acc["stopped"] else ""))
    fid = result.get("fidelity") or {}
    if fid.get("parts"):
        click.echo(f"fidelity: every trial replayed {fid['what']} first; "
                   f"{acc['pruned_on_part']} went no further, {acc['whole']} replayed whole")
    if result.get("note"):
        click.echo(f"note: {result['note']}")
    for o in ("mem", "perf"):
        b = result.get(f"best_{o}")
        if b:
            who = f" ({b['allocator']})" if b.get("allocator") else ""
            click.echo(f"best {o}: trial {b['trial']}{who}: {opts.mem_name()} "
                       f"{b['mem_ratio']:.4f}x glibc, {metric} {b['perf_ratio']:.4f}x glibc"
                       + (f" (seed: {b['seed']})" if b.get("seed") else ""))
            click.echo(_console.setting_lines(b.get("allocator"), b["setting"]))
    if result.get("per_allocator"):
        click.echo("each allocator's best (memory and time x glibc; its defaults in brackets):")
        for r in result["per_allocator"]:
            d = (f"  [{r['defaults_mem_ratio']:.3f} {r['defaults_perf_ratio']:.3f}]"
                 if r["defaults_mem_ratio"] is not None else "")
            click.echo(f"  {r['allocator']:9} {r['mem_ratio']:.3f} {r['perf_ratio']:.3f}{d}  "
                       f"trial {r['trial']}:")
            click.echo(_console.setting_lines(r["allocator"], r["setting"], indent="    "))
    if do_validate:
        _console.show(result["validation"], Console())
    best = result.get(f"best_{'mem' if opts.objective == 'pareto' else opts.objective}") or {}
    take = allocators.family(best.get("allocator")).emit_command  # another: no malloc.c
    click.echo("next: hctune best" + (f" --study {result['study']}" if study_name else "")
               + f" | hctune validate | {take}")
