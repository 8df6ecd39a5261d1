"""hctune import FILE --format text|mtrace -o TRACE: convert and register an existing trace."""

import click

from hctune.trace.importers import FORMATS, import_trace
from hctune.trace.register import register


@click.command("import")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--format", "fmt", type=click.Choice(FORMATS), required=True,
              help="text: Allocate/Free/Realloc lines; mtrace: glibc mtrace() output.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), required=True,
              help="The hctune trace to write.")
@click.pass_context
def command(ctx, file, fmt, output):
    """Import FILE as an hctune trace and register it."""
    out = import_trace(file, fmt, output)
    tid, st = register(ctx.obj["db_path"], out, f"import:{fmt}")
    click.echo(f"hctune: imported {st['events']:,} events, max live {st['max_live_bytes']:,} "
               f"bytes, anomalies {sum(st['anomalies'].values())} -> {out} (trace #{tid})",
               err=True)
