"""hctune explain [TRACE] [--allocators glibc,hc,...] [--json]: each allocator's RSS at the
trace's peak, split into what the program holds and what the allocator and the process add."""

from __future__ import annotations

import json

import click

from hctune import explain as _explain

# one letter per part in the text bar, in PARTS order
LETTERS = {"live": "#", "internal_fragmentation": "r", "free_in_allocator": "f",
           "metadata": "m", "not_returned": "n", "other": "o"}
WORDS = {"live": "live", "internal_fragmentation": "rounding", "free_in_allocator": "free kept",
         "metadata": "metadata", "not_returned": "not returned", "other": "other"}


def _mib(n) -> str:
    return f"{n / 2**20:.1f} MiB"


def bar(entry: dict, scale: int, width: int = 40) -> str:
    """The parts as a bar of `width` characters for `scale` bytes (the largest RSS shown)."""
    out, acc, drawn = "", 0, 0
    for k in _explain.PARTS:
        acc += entry["parts"][k]
        upto = round(width * acc / scale) if scale else 0
        out += LETTERS[k] * max(0, upto - drawn)
        drawn = max(drawn, upto)
    return out


def show(r: dict) -> None:
    """Plain lines that wrap, never clip: a bar per allocator, then its parts in MiB."""
    click.echo(f"{r['trace']}: peak of {_mib(r['peak_live'] or 0)} live at op "
               f"{r['peak_op'] or 0:,} of {r['ops'] or 0:,}")
    click.echo(f"({r['how']})")
    click.echo("(the replay's peak, a prediction: the real program's RSS adds its own code and "
               "data and may peak elsewhere; `hctune validate` measures it)")
    click.echo("bar: " + ", ".join(f"{LETTERS[k]} {WORDS[k]}" for k in _explain.PARTS))
    scale = max((e["rss"] for e in r["candidates"]), default=0)
    for e in r["candidates"]:
        head = _explain.headroom(e)
        click.echo(f"{e['label']:<12} RSS {_mib(e['rss']):>10}  |{bar(e, scale)}")
        parts = ", ".join(f"{WORDS[k]} {_mib(e['parts'][k])}" for k in _explain.PARTS)
        click.echo(f"{'':<12} {parts}; (RSS - other)/live {head + 1:.2f}x" if head is not None
                   else f"{'':<12} {parts}")
        click.echo(f"{'':<12} parts add up to the RSS within {abs(e['check_pct']):.1f} %"
                   + (f" (estimated: {WORDS[e['estimated']]} is the rest of the RSS, at most "
                      f"what {e['detected']} reports)" if e["estimated"] else ""))


@click.command("explain")
@click.argument("trace", required=False, type=click.Path(dir_okay=False))
@click.option("--allocators", "names", default=",".join(_explain.DEFAULT), show_default=True,
              help="Comma-separated allocators (those not installed are left out).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_context
def command(ctx, trace, names, as_json):
    """Where each allocator's RSS goes at the peak of TRACE (default: the latest profiled
    trace): live, rounding (internal fragmentation), free blocks it keeps, metadata, free pages
    not returned, and the replay's own memory; from each allocator's own statistics, checked
    against the RSS."""
    from hctune import allocators  # deferred: the allocator table, only when the command runs
    wanted = [n.strip() for n in names.split(",") if n.strip()]
    for n in wanted:
        if n not in _explain.DEFAULT:
            raise click.UsageError(f"--allocators: use {', '.join(_explain.DEFAULT)}, not {n!r}")
        if not allocators.of(n).available():
            if ctx.get_parameter_source("names") != click.core.ParameterSource.DEFAULT:
                allocators.resolve(n)     # the one line saying how to install it
    if trace is None:
        from hctune.db import Database      # deferred: SQLAlchemy, only when the database is read
        from hctune.trace import register   # deferred: imports hctune.db (SQLAlchemy)
        with Database(ctx.obj["db_path"]) as db:
            trace = str(register.local_path(db, register.latest(db)))
    r = _explain.explain(trace, _explain.candidates(wanted))
    if as_json:
        click.echo(json.dumps(r, indent=2, sort_keys=True))
    else:
        show(r)
