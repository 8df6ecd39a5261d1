"""The Pin tool writes the same format as the preload tracer.  Needs an Intel Pin kit
(PIN_ROOT) and `make pintool PIN_ROOT=...`; without one these tests skip, saying so."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from hctune import paths
from hctune.trace import open_trace
from hctune.trace.stats import compute

PIN_ROOT = os.environ.get("PIN_ROOT")
PIN_TOOL = paths.BUILD / "hctrace_pin.so"
pytestmark = pytest.mark.skipif(
    not PIN_ROOT or not PIN_TOOL.exists(),
    reason="Pin tool not available: set PIN_ROOT to an Intel Pin kit and run make pintool")


def test_pin_traces_the_known_program(tmp_path):
    env = dict(os.environ, TRACE_KNOWN_LOG=str(tmp_path / "log"))
    r = subprocess.run([sys.executable, "-m", "hctune", "--db", str(tmp_path / "db"), "profile",
                        "--tracer", "pin", "-o", str(tmp_path / "k.hct"),
                        str(paths.BUILD / "tests" / "trace_known")], env=env, cwd=tmp_path,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    st = compute(open_trace(tmp_path / "k.hct"))
    assert st["anomalies"] == {"free_unknown": 0, "realloc_unknown": 0, "alloc_live": 0}
    logged = [line.split() for line in (tmp_path / "log").read_text().splitlines()]
    main_pid = next(int(w[0]) for w in logged if w[1] == "t1")
    mine = sum(1 for w in logged if int(w[0]) == main_pid and w[2] != "free")
    assert st["requests"] >= mine
