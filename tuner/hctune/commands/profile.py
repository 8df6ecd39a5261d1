"""hctune profile [-o TRACE] [--tracer preload|pin] [--start-after S] [--duration S]
[--period S] [--signal USR2] PROGRAM ARGS...: trace a program's heap, the whole run or windows
of it."""

import signal

import click

from hctune.errors import HctuneError
from hctune.profile import READY_TIMEOUT, ServerLoad, profile


def stop_signal(name: str) -> int:
    """TERM, SIGTERM or 15 -> 15; one line for anything else."""
    n = name.upper()
    try:
        return int(n) if n.isdigit() else int(signal.Signals[n if n.startswith("SIG")
                                                             else f"SIG{n}"])
    except (KeyError, ValueError):
        raise HctuneError(f"--stop-signal: not a signal: {name}") from None


def server_options(f):
    """--load, --ready, --stop-signal, --warmup, --ready-timeout (profile and validate)."""
    for opt in reversed([
        click.option("--load", "load", metavar="'CMD'",
                     help="PROGRAM is a server: run this shell command as its load (outside "
                          "the tracer or candidate allocator), then stop the server."),
        click.option("--ready", "ready", metavar="'CMD'",
                     help="With --load: run this shell command until it exits 0 before the "
                          "load (the server is ready)."),
        click.option("--ready-timeout", type=float, default=READY_TIMEOUT, show_default=True,
                     metavar="S", help="With --ready: seconds it has to succeed."),
        click.option("--stop-signal", "stop_sig", default="TERM", show_default=True,
                     help="With --load: the signal that stops the server (KILL after 10 s)."),
        click.option("--warmup", type=float, default=0.0, metavar="S",
                     help="With --load: seconds between ready and the load."),
    ]):
        f = opt(f)
    return f


def server_load(load, ready, ready_timeout, stop_sig, warmup) -> ServerLoad | None:
    if load is None:
        if ready is not None:
            raise HctuneError("--ready needs --load (the server's load command)")
        return None
    return ServerLoad(load, ready, stop_signal(stop_sig), warmup, ready_timeout).check()


@click.command("profile", context_settings={"ignore_unknown_options": True,
                                            "allow_interspersed_args": False})
@click.option("-o", "--output", type=click.Path(dir_okay=False),
              help="Trace file (default hctune-traces/<program>-<time>.hct).")
@click.option("--tracer", type=click.Choice(["preload", "pin"]), default="preload",
              show_default=True, help="LD_PRELOAD library or Intel Pin tool (needs PIN_ROOT).")
@click.option("--timestamps", is_flag=True,
              help="Record a time stamp per event (costs ~2x on some machines).")
@click.option("--start-after", type=click.FloatRange(min=0), metavar="SECONDS",
              help="Record only from SECONDS after the program starts (the blocks live then "
                   "open the trace); for services after their warm-up.")
@click.option("--duration", type=click.FloatRange(min=0, min_open=True), metavar="SECONDS",
              help="Stop recording SECONDS after recording began (the program runs on).")
@click.option("--signal", "toggle", type=click.Choice(["USR1", "USR2"]),
              help="Record from when the program gets this signal (kill -USR2 PID) to the next "
                   "one (or --duration after it); each later signal opens or shuts a window "
                   "again.")
@click.option("--period", type=click.FloatRange(min=0, min_open=True), metavar="SECONDS",
              help="Time slices: record --duration seconds of every SECONDS (from "
                   "--start-after); each slice opens with the blocks then live.")
@server_options
@click.argument("program")
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@click.pass_context
def command(ctx, output, tracer, timestamps, start_after, duration, toggle, period, load, ready,
            ready_timeout, stop_sig, warmup, program, args):
    """Run PROGRAM ARGS as is, recording every malloc/calloc/realloc/free/memalign.

    Options after PROGRAM belong to it (a `--` before PROGRAM also works).  Exits with the
    program's exit code; the traces are registered in the results database.  A server:
    `hctune profile --load 'CMD' [--ready 'CMD'] -- SERVER ARGS` (docs/servers.md).
    """
    server = server_load(load, ready, ready_timeout, stop_sig, warmup)
    sig = signal.Signals[f"SIG{toggle}"] if toggle else None
    if sig and period:
        raise HctuneError("--period and --signal do not go together: slices come by the clock")
    if sig:
        click.echo(f"hctune: recording starts when {program} gets SIG{toggle} "
                   f"(kill -{toggle} <its pid>) and stops at the next; each later one opens "
                   "or shuts a window again", err=True)
    p = profile([program, *args], output, tracer, ctx.obj["db_path"], timestamps,
                start_after, duration, sig, period, server)
    s = p.main_stats
    if sig and not s["events"]:
        click.echo(f"hctune: warning: nothing recorded: the program made no allocator call "
                   f"after a SIG{toggle}", err=True)
    elif (start_after or duration) and not s["events"]:
        click.echo(f"hctune: warning: nothing recorded: the program made no allocator call "
                   f"after {start_after or 0:g} s", err=True)
    # the tracer's counts (no event is read again after the program exits: issue 23)
    what = (f" ({s['allocations']:,} allocations, {s['reallocs']:,} reallocs, {s['frees']:,} "
            f"frees; {s['bytes_requested']:,} bytes asked)" if "ops" in s else "")
    threads = f" in {s['threads']} threads" if s["threads"] > 1 else ""
    click.echo(f"hctune: traced {s['events']:,} events{what}{threads} -> {p.main} "
               f"(trace #{p.main_id}); `hctune stats` for max live bytes and sizes", err=True)
    if p.others:
        click.echo(f"hctune: {len(p.others)} other process trace(s) beside it: "
                   + ", ".join(o.name for o, _ in p.others[:5])
                   + (" ..." if len(p.others) > 5 else ""), err=True)
    if p.signal:
        try:
            name = f" ({signal.Signals(p.signal).name})"
        except ValueError:
            name = ""
        click.echo(f"hctune: the program died of signal {p.signal}{name}; the trace covers its "
                   "events up to that point", err=True)
    for line in p.skipped:
        click.echo(f"hctune: warning: skipped {line}", err=True)
    if p.exit_code:
        raise click.exceptions.Exit(p.exit_code)
