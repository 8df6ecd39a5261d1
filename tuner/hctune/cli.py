"""The `hctune` command: a thin Click group over the library, one module per command in
hctune/commands/ (each exports `command`). User mistakes raise HctuneError: one line, exit 2.

COMMANDS below is the list of what exists. A command's module is imported only when that
command runs (or its --help is asked), so `hctune --help` and the light commands (`stats` of a
trace file) never import Optuna, SQLAlchemy, Rich or matplotlib. To add a command: write
hctune/commands/NAME.py with `command`, and add one line here (tests/test_core_cli.py checks
that the list and the folder agree)."""

from __future__ import annotations

import importlib
import os
import sys

import click

from hctune.errors import HctuneError, database_error_line, is_database_error, os_error_line

# name: (module in hctune.commands, the one line `hctune --help` shows for it)
COMMANDS: dict[str, tuple[str, str]] = {
    "profile": ("profile", "Run a program, recording its malloc/calloc/realloc/free/memalign."),
    "import": ("import_", "Import a trace of another format and register it."),
    "stats": ("stats", "What a trace says about the heap (sizes, live bytes, graph)."),
    "replay": ("replay", "Replay a trace against one allocator in the replay harness."),
    "compare": ("compare", "Memory and time of each allocator on a trace."),
    "explain": ("explain", "Where each allocator's RSS goes at the trace's peak."),
    "search": ("search", "Search HC's knobs for traces (default: the latest profile)."),
    "best": ("best", "Show the best setting of a study against glibc and generic."),
    "validate": ("validate", "Run the real program under a study's best settings."),
    "check": ("check", "Re-run a validated answer against the references it beat (CI)."),
    "studies": ("studies", "List the studies: trace, objective, trials, best, verdict."),
    "emit": ("emit", "Write the tuned allocator as one self-contained malloc.c."),
    "report": ("report", "Write an HTML report of a study."),
    "serve": ("serve", "Serve the web app and JSON API."),
    "worker": ("worker", "Take queued studies and run their trials."),
    "doctor": ("doctor", "Check the tools and native parts hctune uses."),
}


class _LazyGroup(click.Group):
    """Commands from COMMANDS, each imported when first asked for."""

    def list_commands(self, ctx):
        return sorted(COMMANDS)

    def get_command(self, ctx, name):
        if name not in COMMANDS:
            return None
        module, summary = COMMANDS[name]
        cmd = importlib.import_module(f"hctune.commands.{module}").command
        cmd.short_help = summary
        return cmd

    def format_commands(self, ctx, formatter):
        # The listing from COMMANDS alone: no command module is imported for `hctune --help`.
        rows = [(name, COMMANDS[name][1]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except Exception as e:
            if not is_database_error(e):
                raise
            # a read-only or locked database file, a lost PostgreSQL connection: one line
            # naming the database of this run (the group's --db, in ctx.obj)
            db_path = (ctx.obj or {}).get("db_path")
            raise HctuneError(database_error_line(e, db_path)) from None


def _print_version(ctx, param, value):
    if not value or ctx.resilient_parsing:
        return
    from hctune import VERSION_TEXT      # package metadata and `git describe`: only when asked
    click.echo(f"hctune {VERSION_TEXT}")
    ctx.exit()


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--version", is_flag=True, expose_value=False, is_eager=True,
              callback=_print_version, help="Show the version and exit.")
@click.option("--db", "db_path", envvar="HCTUNE_DB", default="hctune.db", show_default=True,
              type=click.Path(dir_okay=False),
              help="Results database: a SQLite file, or postgresql://user@host/db to share "
                   "traces, studies and the service's queue between machines.")
@click.pass_context
def cli(ctx: click.Context, db_path: str):
    """Profile a program's heap, tune the HC allocator to it, emit a tuned malloc.c.

    \b
      hctune profile ./app args...      record the program's malloc/realloc/free
      hctune search --objective mem     tune HC to the latest profile
      hctune emit -o malloc.c           write the tuned allocator; build it into the app
    """
    ctx.obj = {"db_path": db_path}
    _new_db.clear()
    if "://" not in db_path and not os.path.exists(db_path):
        _new_db.append(db_path)      # created by this run, if at all


_new_db: list[str] = []
_TABLES = ("hc_traces", "hc_studies", "hc_validations", "hc_queue", "hc_measurements",
           "studies")     # the last: Optuna's, beside hctune's by default


def _drop_new_db() -> None:
    """A command that failed leaves no hctune.db behind that it created and put nothing in (a
    mistyped command in the wrong directory must not litter it)."""
    if not _new_db or not os.path.isfile(_new_db[0]):
        return
    path = _new_db[0]
    from hctune import db  # deferred: SQLAlchemy, only after a failed command, to look into what it created
    if db.holds_rows(path, _TABLES) is not False:
        return
    for suffix in ("", "-wal", "-shm", "-journal"):
        try:
            os.unlink(path + suffix)
        except OSError:
            pass


def main(argv=None) -> int:
    try:
        rc = _main(argv)
    except BaseException:
        _drop_new_db()
        raise
    if rc != 0:
        _drop_new_db()
    return rc


def _main(argv=None) -> int:
    try:
        rv = cli.main(args=argv, prog_name="hctune", standalone_mode=False)
        # click returns (not raises) a command's click.exceptions.Exit code in this mode
        if isinstance(rv, int) and not isinstance(rv, bool):
            return rv
    except HctuneError as e:
        click.echo(f"hctune: error: {e}", err=True)
        return e.exit_code
    except click.exceptions.Abort:
        click.echo("hctune: interrupted", err=True)
        return 130
    except click.UsageError as e:
        # One line, like every other user mistake; the hint names the command's --help.
        where = e.ctx.command_path if e.ctx else "hctune"
        click.echo(f"hctune: error: {e.format_message()} (see '{where} --help')", err=True)
        return 2
    except click.ClickException as e:
        click.echo(f"hctune: error: {e.format_message()}", err=True)
        return 2
    except click.exceptions.Exit as e:
        return e.exit_code
    except KeyboardInterrupt:
        click.echo("hctune: interrupted", err=True)
        return 130
    except OSError as e:
        # unwritable output, full disk, file-size limit, missing program: one line, what + where
        click.echo(f"hctune: error: {os_error_line(e)}", err=True)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
