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
    if name not in cli.list_commands(None):
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


def test_the_command_list_and_the_folder_agree():
    from pathlib import Path

    from hctune.cli import COMMANDS
    folder = Path(__file__).resolve().parents[1] / "tuner" / "hctune" / "commands"
    modules = {p.stem for p in folder.glob("*.py") if not p.stem.startswith("_")}
    listed = {module for module, _ in COMMANDS.values()}
    assert modules == listed, (
        f"hctune/commands/ and hctune.cli.COMMANDS disagree: add one line to COMMANDS for "
        f"{sorted(modules - listed)}; remove {sorted(listed - modules)}")
    for name in COMMANDS:
        assert cli.get_command(None, name).name == name


HEAVY = ("optuna", "sqlalchemy", "rich", "matplotlib", "numpy")


def _heavy_imports(*args):
    """The heavy libraries (of HEAVY) in sys.modules after running `hctune ARGS` in-process."""
    code = ("import sys\nfrom hctune.cli import main\nrc = main(sys.argv[1:])\n"
            f"print(rc, sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r})))")
    r = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True)
    rc, loaded = r.stdout.strip().splitlines()[-1].split(" ", 1)
    assert rc == "0", r.stderr
    return loaded


def test_help_and_version_import_no_heavy_library():
    """`hctune --help` answers at once: it imports no command module (a count, not a time;
    the time is bench/cli_start.py's)."""
    assert _heavy_imports("--help") == "[]"
    assert _heavy_imports("--version") == "[]"


def test_stats_of_a_trace_file_imports_no_database_or_optuna(tmp_path):
    from hctune.trace import Writer, spec
    path = tmp_path / "t.hct"
    with Writer(path, command="written") as w:
        w.event(spec.MALLOC, 0x1000, 24)
        w.event(spec.FREE, 0x1000)
    assert _heavy_imports("stats", str(path), "--json") == "[]"


def test_a_failing_command_leaves_no_new_database(tmp_path):
    """hctune.db in the current directory is not created by a command that fails; one that
    already held something is left alone."""
    for args in (("best",), ("emit", "-o", "m.c"), ("validate",), ("search", "missing.hct"),
                 ("report", "--objective", "mem")):
        r = subprocess.run([sys.executable, "-m", "hctune", *args], capture_output=True,
                           text=True, cwd=tmp_path)
        assert r.returncode == 2 and "Traceback" not in r.stderr, (args, r.stderr)
        assert r.stderr.count("\n") == 1, r.stderr     # the error alone: no bar drawn first
        assert sorted(p.name for p in tmp_path.iterdir()) == [], args
    from hctune.db import Database
    with Database(tmp_path / "hctune.db") as db:
        db.add_trace(tmp_path / "t.hct", "ab" * 32, command="app", events=1)
    assert main(["--db", str(tmp_path / "hctune.db"), "best"]) == 2
    assert (tmp_path / "hctune.db").exists()


def test_studies_without_any(tmp_path):
    from click.testing import CliRunner
    r = CliRunner().invoke(cli, ["--db", str(tmp_path / "h.db"), "studies"])
    assert r.exit_code == 0 and "no study yet" in r.output


def test_studies_name_the_memory_their_best_compares(tmp_path, capsys):
    """`hctune studies`: an HC study's best is its footprint; one across allocators, its peak
    RSS in the replay; a --memory-measure study, that RSS (issue 18)."""
    from hctune.commands import studies
    from hctune.db import Database
    from hctune.search import listing
    db = tmp_path / "h.db"
    with Database(db) as d:
        tid = d.add_trace(tmp_path / "t.hct", "ab" * 32, command="app", events=1)
        for name, opts in (("hc", {}), ("cross", {"allocators": ["hc", "glibc"]}),
                           ("final", {"allocators": ["hc", "glibc"], "memory_measure": "final"})):
            d.add_study(name, "mem", [tid], f"sqlite:///{tmp_path / 'optuna.db'}", opts)
    rows = listing.studies(db)
    assert [r["memory"] for r in rows] == ["footprint", "peak RSS", "final RSS"]
    best = {"mem": {"trial": 3, "mem_ratio": 0.8, "perf_ratio": 1.1}}
    studies.show([{**r, "error": None, "trials": 4, "failed": 0, "feasible": 4, "best": best}
                  for r in rows])
    out = capsys.readouterr().out
    for memory in ("footprint", "peak RSS", "final RSS"):
        assert f"mem: trial 3 ({memory} 0.800x glibc, time 1.100x)" in out
