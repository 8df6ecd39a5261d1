"""The `hctune` command: a thin Click group over the library, one module per command in
hctune/commands/ (each exports `command`). User mistakes raise HctuneError: one line, exit 2."""

from __future__ import annotations

import importlib
import pkgutil
import sys

import click

from hctune import VERSION_TEXT, commands
from hctune.errors import HctuneError, database_error_line, is_database_error, os_error_line


class _Group(click.Group):
    def list_commands(self, ctx):
        return sorted(self.commands)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(VERSION_TEXT, prog_name="hctune", message="%(prog)s %(version)s")
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
    _state["db_path"] = db_path


_state: dict = {}      # what main's error lines name (the database of this run)


for _info in pkgutil.iter_modules(commands.__path__):
    if not _info.name.startswith("_"):
        cli.add_command(importlib.import_module(f"hctune.commands.{_info.name}").command)


def main(argv=None) -> int:
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
    except Exception as e:
        if not is_database_error(e):
            raise
        # a read-only or locked database file, a lost PostgreSQL connection
        click.echo(f"hctune: error: {database_error_line(e, _state.get('db_path'))}", err=True)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
