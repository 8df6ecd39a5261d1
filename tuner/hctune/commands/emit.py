"""`hctune emit`: write the tuned malloc.c (and .so), with Make and CMake snippets beside it."""

from __future__ import annotations

import json

import click

from hctune import emit as _emit
from hctune import knobs


@click.command("emit")
@click.option("--study", "study_name", default=None, help="Study name (default: the latest).")
@click.option("--objective", type=click.Choice(["mem", "perf"]), default=None,
              help="Which best of the study (default: its objective; mem for pareto).")
@click.option("--preset", default=None,
              help=f"Emit a paper setting instead of a study's: {', '.join(knobs.preset_names())}.")
@click.option("--set", "sets", multiple=True, metavar="KNOB=VALUE",
              help="Override one knob (repeatable).")
@click.option("-o", "--output", required=True, type=click.Path(), help="The malloc.c to write.")
@click.option("--so", "so", default=None, type=click.Path(dir_okay=False),
              help="Also compile the shared library (for LD_PRELOAD), e.g. libhcmalloc.so.")
@click.option("--json", "as_json", is_flag=True, help="Print what was written as JSON.")
@click.pass_context
def command(ctx, study_name, objective, preset, sets, output, so, as_json):
    """Write the tuned allocator as one self-contained malloc.c.

    \b
    Build it into a program:   cc -O2 app.c malloc.c -lpthread
    or as a preloadable .so:   hctune emit -o malloc.c --so libhcmalloc.so
    malloc.mk and hcmalloc.cmake are written beside it for make and CMake builds.
    """
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
        click.echo(f"wrote {w['so']}  (LD_PRELOAD={w['so']} ./app)")
    click.echo(f"wrote {w['malloc.mk']} and {w['hcmalloc.cmake']}  "
               f"(or simply: cc -O2 app.c {w['malloc_c']} -lpthread)")
