"""`python -m hctune` with gates, for the tests that need a moment to happen while they look:
two processes each in a trial at once, a worker caught mid-trial or mid-comparison. Polling for
such a moment fails on a loaded machine (a 4-trial study can run between two polls); a gate makes
the moment last until the test acts, so the test waits on a file, not a clock.

    python tests/gate.py ARGS...        what `python -m hctune ARGS...` does, with the gates
                                        that the environment (made by env() below) asks for:

GATE_MEET=DIR:N      this process's first trial (its parameters drawn, nothing measured yet)
                     waits until N processes are each in their first trial (one file a process
                     in DIR), so each of them runs at least one trial of a shared study.
GATE_HANG=STEP:FILE  at STEP, create FILE and wait there until the test kills the process or
                     lets it go on (release(FILE)): `trial:K` (this process's K-th trial, from
                     1, before it measures: the trial is RUNNING in the storage) or `compare`
                     (the closing worker, before it measures the other allocators).

The tests use env(), serve_support.worker() or popen(), wait_for() and release() from here."""

from __future__ import annotations

import os
import runpy
import signal
import subprocess
import sys
import time
from pathlib import Path

GUARD_SECONDS = 300      # a gate never met: give up (the test then fails on what it sees)


def env(base=None, meet: tuple[Path, int] | None = None, hang: tuple[str, Path] | None = None):
    """The environment that asks tests/gate.py for these gates (base: os.environ)."""
    e = dict(os.environ if base is None else base)
    if meet is not None:
        Path(meet[0]).mkdir(parents=True, exist_ok=True)
        e["GATE_MEET"] = f"{meet[0]}:{meet[1]}"
    if hang is not None:
        e["GATE_HANG"] = f"{hang[0]}:{hang[1]}"
    return e


def argv(*args) -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), *map(str, args)]


def popen(db, *args, env) -> subprocess.Popen:
    """`hctune --db DB ARGS` through the gates of `env` (from env()), output piped as text."""
    return subprocess.Popen(argv("--db", db, *args), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)


def wait_for(path: Path, *procs: subprocess.Popen, what: str = "") -> None:
    """Until `path` exists (a gate reached); fails at once if one of `procs` ends first."""
    deadline = time.time() + GUARD_SECONDS
    while not Path(path).exists():
        for p in procs:
            assert p.poll() is None, f"{what or path}: a process ended ({p.returncode}) first"
        assert time.time() < deadline, f"{what or path}: not reached in {GUARD_SECONDS} s"
        time.sleep(0.02)


def release(path: Path) -> None:
    """Let the process waiting at the gate that made `path` go on."""
    Path(f"{path}.go").write_text("")


# ---- in the gated process ----

def _hang(marker: str):
    with open(marker, "w") as f:
        f.write(str(os.getpid()))
    try:
        old = signal.signal(signal.SIGTERM, signal.SIG_DFL)   # stop_workers' terminate()
    except ValueError:                                        # not the main thread
        old = None
    while not os.path.exists(f"{marker}.go"):
        time.sleep(0.02)
    if old is not None:
        signal.signal(signal.SIGTERM, old)


def _meet(spec: str):
    folder, _, parties = spec.rpartition(":")
    (Path(folder) / str(os.getpid())).write_text("")
    deadline = time.time() + GUARD_SECONDS
    while len(os.listdir(folder)) < int(parties) and time.time() < deadline:
        time.sleep(0.02)


def _install():
    meet, hang = os.environ.get("GATE_MEET"), os.environ.get("GATE_HANG", "")
    step, _, marker = hang.partition(":")
    at = None
    if step == "trial":
        at, _, marker = marker.partition(":")
        at = int(at)
    if meet or at is not None:
        from hctune.search import objective
        evaluate, count = objective.Evaluator.evaluate, [0]

        def gated(self, *a, **kw):
            count[0] += 1
            if meet and count[0] == 1:
                _meet(meet)
            if count[0] == at:
                _hang(marker)
            return evaluate(self, *a, **kw)
        objective.Evaluator.evaluate = gated
    if step == "compare":
        from hctune.jobs import runner as worker
        compare = worker.compare_others

        def gated_compare(*a, **kw):
            _hang(marker)
            return compare(*a, **kw)
        worker.compare_others = gated_compare


if __name__ == "__main__":
    _install()
    sys.argv[0] = "hctune"
    runpy.run_module("hctune", run_name="__main__", alter_sys=True)
