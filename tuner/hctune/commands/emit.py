"""`hctune emit`: write the tuned malloc.c (and .so), with Make and CMake snippets beside it."""

from __future__ import annotations

import json
from pathlib import Path

import click

from hctune import allocators
from hctune import emit as _emit
from hctune import knobs


@click.command("emit")
@click.option("--study", "study_name", default=None, help="Study name (default: the latest).")
@click.option("--objective", type=click.Choice(["mem", "perf"]), default=None,
              help="Which best of the study (default: its objective; mem for pareto).")
@click.option("--preset", default=None,
              help=f"Emit a paper setting instead of a study's: {', '.join(knobs.preset_names())}.")
@click.option("--set", "sets", multiple=True, metavar="KNOB=VALUE",
              help="Override one knob (repeatable): HC's QL_HIGH=128, another allocator's "
                   "jemalloc.narenas=1.")
@click.option("-o", "--output", default=None, type=click.Path(),
              help="The malloc.c to write (an HC recommendation).")
@click.option("--env", "env_file", default=None, type=click.Path(dir_okay=False),
              help="Write a shell file that, sourced, runs a program under the recommendation "
                   "(any allocator): LD_PRELOAD and the allocator's variables, and the same as "
                   "export line, GLIBC_TUNABLES/MALLOC_CONF string, systemd drop-in, "
                   "Dockerfile ENV.")
@click.option("--allocator", default=None,
              help="With --env: this allocator (glibc, jemalloc, mimalloc, tcmalloc) at its "
                   "defaults or --set values, instead of a study's recommendation.")
@click.option("--so", "so", default=None, type=click.Path(dir_okay=False),
              help="Also compile the shared library (for LD_PRELOAD), e.g. libhcmalloc.so.")
@click.option("--json", "as_json", is_flag=True, help="Print what was written as JSON.")
@click.pass_context
def command(ctx, study_name, objective, preset, sets, output, env_file, allocator, so, as_json):
    """Write the tuned allocator as one self-contained malloc.c.

    \b
    Build it into a program:   cc -O2 app.c malloc.c -lpthread
    or as a preloadable .so:   hctune emit -o malloc.c --so libhcmalloc.so
    malloc.mk and hcmalloc.cmake are written beside it for make and CMake builds.
    """
    if env_file is not None:
        w = _emit.emit_env(ctx.obj["db_path"], env_file, study_name, objective, preset, sets,
                           allocator, output, so)
        if as_json:
            click.echo(json.dumps(w, indent=2, sort_keys=True, default=str))
            return
        if "malloc_c" in w:
            click.echo(f"wrote {w['malloc_c']} and {w['so']}")
        click.echo(f"wrote {w['env']}  (. ./{Path(w['env']).name} && ./app: "
                   + " ".join(f"{k}={v}" for k, v in w["variables"].items()) + ")"
                   if w["variables"] else f"wrote {w['env']}  (glibc's defaults: nothing to set)")
        return
    if output is None:
        raise click.UsageError("give -o malloc.c (HC) or --env FILE (any allocator)")
    if not allocators.of(allocator).compiled:
        raise click.UsageError(f"--allocator {allocator} has no malloc.c; use --env FILE")
    w = _emit.emit(ctx.obj["db_path"], output, study_name, objective, preset, sets, so)
    if as_json:
        click.echo(json.dumps(w, indent=2, sort_keys=True, default=str))
        return
    click.echo(f"wrote {w['malloc_c']} ({w['provenance']['objective']})")
    if w["provenance"].get("recommendation"):
        click.echo(f"note: {w['provenance']['recommendation']}")
    elif w["provenance"].get("verdict"):
        click.echo(f"verdict: {w['provenance']['verdict']}")
    if "so" in w:
        # absolute: the line works from any directory the program is started in
        click.echo(f"wrote {w['so']}  (LD_PRELOAD={Path(w['so']).resolve()} ./app)")
    click.echo(f"wrote {w['malloc.mk']} and {w['hcmalloc.cmake']}  "
               f"(or simply: cc -O2 app.c {w['malloc_c']} -lpthread)")
