"""The CLI shell: every command has --help; user mistakes are one line and exit code 2."""

import subprocess
import sys

import pytest

from hctune.cli import cli, main

COMMANDS = ["profile", "stats", "import", "replay", "compare", "search", "best", "emit", "report"]


def run(*args):
    return subprocess.run([sys.executable, "-m", "hctune", *args], capture_output=True, text=True)


def test_version_and_help():
    r = run("--help")
    assert r.returncode == 0 and "profile" in r.stdout


@pytest.mark.parametrize("name", COMMANDS)
def test_every_command_has_help(name):
    if name not in cli.commands:
        pytest.fail(f"command {name} is missing")
    r = run(name, "--help")
    assert r.returncode == 0, r.stderr
    assert "Usage" in r.stdout


def test_unknown_command_exits_2():
    r = run("frobnicate")
    assert r.returncode == 2 and "Traceback" not in r.stderr


def test_db_that_is_a_directory(tmp_path, capsys):
    assert main(["--db", str(tmp_path), "best"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") <= 2
