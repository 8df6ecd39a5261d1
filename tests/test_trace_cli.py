"""`hctune profile`, `hctune stats`, `hctune import` as the user types them: exit codes and
stdin/stdout pass through, bad input is one line and exit 2 with nothing left registered."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import hctune as run_hctune
from hctune.db import Database

def hctune(tmp_path, *args, **kw):
    return run_hctune(tmp_path / "h.db", *args, check=False, timeout=120, cwd=tmp_path, **kw)


def _rows(tmp_path):
    if not (tmp_path / "h.db").exists():
        return []
    with Database(tmp_path / "h.db") as db:
        return db.traces()


def _one_line_error(r, words):
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hctune: error:") and words in lines[0], \
        r.stderr
    assert "Traceback" not in r.stderr


def test_profile_passes_exit_code_stdin_stdout(tmp_path):
    r = hctune(tmp_path, "profile", "sh", "-c", "read x; echo got $x; exit 3", input="hello\n")
    assert r.returncode == 3
    assert r.stdout == "got hello\n"
    assert "traced" in r.stderr
    traces = list((tmp_path / "hctune-traces").glob("sh-*.hct"))
    assert traces and len(_rows(tmp_path)) == len(traces)


def test_profile_reads_no_event_after_the_exit(tmp_path):
    """profile prints the tracer's counts and leaves the statistics to the first command that
    needs them (issue 23); those counts are the statistics' own."""
    r = hctune(tmp_path, "profile", "-o", "t.hct", "ls", "-l", "/")
    assert r.returncode == 0, r.stderr
    assert list(tmp_path.glob("*.sum")) == []            # the tracer's counts were read, not kept
    (row,) = _rows(tmp_path)
    assert row["stats_json"] is None
    from hctune.files import sha256      # hashed while the tracer wrote it: the same hash
    assert row["sha256"] == sha256(tmp_path / "t.hct")
    st = json.loads(hctune(tmp_path, "stats", "t.hct", "--json").stdout)
    assert (f"traced {st['events']:,} events ({st['allocations']:,} allocations, "
            f"{st['reallocs']:,} reallocs, {st['frees']:,} frees; {st['bytes_requested']:,} "
            "bytes asked)") in r.stderr
    from hctune.trace import register
    with Database(tmp_path / "h.db") as db:
        assert register.stats_of(db, row)["max_live_bytes"] == st["max_live_bytes"]
        assert json.loads(db.trace(row["id"])["stats_json"]) == st     # stored on first use


def test_profile_options_after_program_belong_to_it(tmp_path):
    r = hctune(tmp_path, "profile", "-o", "a.hct", "--", "ls", "-o", "--tracer", "x")
    # ls gets -o --tracer x: the x and --tracer files do not exist, so ls fails with 2
    assert r.returncode == 2 and "x" in r.stderr and (tmp_path / "a.hct").exists()
    r = hctune(tmp_path, "profile", "-o", "b.hct", "ls", "-l", "-o")
    assert r.returncode == 0 and (tmp_path / "b.hct").exists()


def test_profile_missing_program(tmp_path):
    _one_line_error(hctune(tmp_path, "profile", "./no-such-program"), "program not found")
    _one_line_error(hctune(tmp_path, "profile", "no-such-program-xyz"), "program not found")
    assert _rows(tmp_path) == []


@pytest.mark.skipif(not shutil.which("cc"), reason="no C compiler")
def test_profile_refuses_static_and_setuid(tmp_path):
    (tmp_path / "m.c").write_text("#include <stdlib.h>\nint main(void){free(malloc(9));return 0;}\n")
    r = subprocess.run(["cc", "-static", "-o", str(tmp_path / "static"), str(tmp_path / "m.c")],
                       capture_output=True)
    if r.returncode == 0:
        _one_line_error(hctune(tmp_path, "profile", "./static"), "statically linked")
    subprocess.run(["cc", "-o", str(tmp_path / "suid"), str(tmp_path / "m.c")], check=True)
    os.chmod(tmp_path / "suid", 0o4755)
    _one_line_error(hctune(tmp_path, "profile", "./suid"), "setuid")
    assert _rows(tmp_path) == []
    assert not list(tmp_path.glob("hctune-traces/*"))


def test_stats_outputs(tmp_path):
    assert hctune(tmp_path, "profile", "-o", "t.hct", "ls", "/").returncode == 0
    r = hctune(tmp_path, "stats", "--json", "--html", "s.html", "--png", "s.png")
    assert r.returncode == 0, r.stderr
    st = json.loads(r.stdout)
    assert st["events"] > 10 and st["max_live_bytes"] > 0 and len(st["graph"]["event"]) <= 2000
    html = (tmp_path / "s.html").read_text()
    assert "Table" in html and "data:image/png;base64," in html and '"max_live_bytes"' in html
    assert (tmp_path / "s.png").read_bytes()[:4] == b"\x89PNG"
    r = hctune(tmp_path, "stats", "t.hct")
    assert r.returncode == 0 and "max live bytes" in r.stdout


def test_stats_bad_trace(tmp_path):
    (tmp_path / "bad.hct").write_bytes(b"not a trace at all, really not one")
    _one_line_error(hctune(tmp_path, "stats", "bad.hct"), "not an hctune trace")
    _one_line_error(hctune(tmp_path, "stats", "missing.hct"), "missing.hct")
    _one_line_error(hctune(tmp_path, "stats"), "no trace given")


def test_import_registers(tmp_path):
    (tmp_path / "t.txt").write_text("Allocate a 10\nAllocate b 2000\nFree a\n"
                                    "Realloc b c 3000\nf c\n")
    r = hctune(tmp_path, "import", "t.txt", "--format", "text", "-o", "t.hct")
    assert r.returncode == 0, r.stderr
    rows = _rows(tmp_path)
    assert len(rows) == 1 and rows[0]["tracer"] == "import:text" and rows[0]["events"] == 5


def test_import_garbage_leaves_nothing(tmp_path):
    (tmp_path / "g.txt").write_text("Allocate a 10\nthis is not a trace line\n")
    _one_line_error(hctune(tmp_path, "import", "g.txt", "--format", "text", "-o", "g.hct"),
                    "g.txt:2")
    (tmp_path / "m.txt").write_text("= Start\n@ ./p:[0x1] + 0xzz 0x10\n")
    _one_line_error(hctune(tmp_path, "import", "m.txt", "--format", "mtrace", "-o", "m.hct"),
                    "m.txt:2")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.txt", "m.txt"] or \
        not list(tmp_path.glob("*.hct"))
    assert _rows(tmp_path) == []
