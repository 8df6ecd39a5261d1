"""SIGTERM or Ctrl-C to `hctune validate` (issue 32, item 5): the run in progress is killed with
its whole process group (hcrun and the program's children), nothing is left running, and the
validation is marked interrupted, with no summary, winner or verdict (never shown as a result).
The program waits on a gate (it writes its pid, then sleeps), so the signal always comes in
the middle of a run, without a fixed sleep."""

import os
import signal
import sqlite3
import subprocess
import time
import uuid

import pytest

from conftest import HCTUNE, hctune
from search_support import GAWK_PROGRAM

pytestmark = pytest.mark.timeout(120)


def _running_with(marker: str) -> list[int]:
    """pids of the processes whose command line holds `marker`."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if marker.encode() in f.read():
                    found.append(int(pid))
        except OSError:
            pass
    return found


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """A study of one glibc trial on a gawk trace: the cheapest one validate accepts."""
    d = tmp_path_factory.mktemp("interrupt")
    db = d / "hctune.db"
    hctune(db, "profile", "-o", d / "t.hct", "gawk", GAWK_PROGRAM, cwd=d)
    hctune(db, "search", "--objective", "mem", "--trials", 1, "--repeat", 1, "--allocators",
           "glibc", cwd=d)
    return d, db


@pytest.mark.parametrize("sig", [signal.SIGTERM])     # (SIGINT takes the same path)
def test_a_signalled_validate_leaves_nothing_running(study, sig):
    d, db = study
    marker = f"hctune-gate-{uuid.uuid4().hex}"
    gate = d / f"{marker}.pid"
    # the program: its pid to the gate, then a child that would outlive it by far
    script = f'echo $$ > {gate}; sleep 300 & wait # {marker}'
    p = subprocess.Popen([*HCTUNE, "--db", str(db), "validate", "--runs", "3",
                          "--no-references", "--", "sh", "-c", script], cwd=d,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    try:
        deadline = time.monotonic() + 90
        while not (gate.exists() and gate.read_text().strip()):
            assert p.poll() is None, p.communicate()
            assert time.monotonic() < deadline, "the program never started"
            time.sleep(0.02)
        assert _running_with(marker)                 # the program and its sleep are running
        os.kill(p.pid, sig)
        out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    assert p.returncode == 130, err
    assert err.strip().splitlines()[-1] == "hctune: interrupted", err
    assert "Traceback" not in err
    # every process of the run is gone (killpg is immediate, reaping may take a moment)
    deadline = time.monotonic() + 10
    while _running_with(marker) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert _running_with(marker) == []
    con = sqlite3.connect(db)
    status, summary, verdict, winner = con.execute(
        "SELECT status, summary_json, verdict, winner FROM hc_validations "
        "ORDER BY id DESC LIMIT 1").fetchone()
    assert (status, summary, verdict, winner) == ("interrupted", None, None, None)
    assert hctune(db, "best", "--json", cwd=d, check=False).stdout.count('"validation_id"') == 0
