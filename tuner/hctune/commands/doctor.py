"""`hctune doctor [--json]`: what is present, what is missing and the command that adds it."""

import json

import click

from hctune import doctor


@click.command("doctor")
@click.option("--json", "as_json", is_flag=True, help="Print the findings as JSON.")
def command(as_json):
    """Check the C compiler, valgrind, jemalloc/mimalloc/tcmalloc, PostgreSQL, strace,
    chromium and a Pin kit, and whether the native parts (tracer, replay harness, baselines)
    are built. Exit 1 when something required is missing."""
    r = doctor.report()
    click.echo(json.dumps(r, indent=2) if as_json else doctor.text(r))
    if not all(d["present"] for d in r["dependencies"] if d["required"]):
        raise click.exceptions.Exit(1)
