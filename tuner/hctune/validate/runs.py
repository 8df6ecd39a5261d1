"""The measuring loop: one warm-up run on glibc (the reference output and exit status), then
interleaved rounds, every candidate once per round in a shuffled order, each run measured by
the launcher; a run that differs from glibc's, crashes or times out disqualifies its candidate."""

from __future__ import annotations

import hashlib
import os
import random
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from hctune import allocators
from hctune import profile as _profile
from hctune.errors import HctuneError
from hctune.search import options as _options
from hctune.validate.candidates import Candidate
from hctune.validate.launcher import hcrun
from hctune.validate.program import Program

MIN_RUNS = _options.VALIDATE_MIN_RUNS      # said once, with a study's other options
DEFAULT_RUNS = _options.VALIDATE_RUNS


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def run_once(launcher: Path, prog: Program, cand: Candidate, timeout: float | None,
             reference: dict | None = None) -> dict:
    """Run the program once under `cand`; the run's row for hc_real_runs (problem set when it
    differs from `reference` = glibc's {"stdout_sha256", "exit_status"} or crashed)."""
    env = allocators.Allocator(cand.allocator, cand.library).env()
    env.pop("HCMALLOC_STATS", None)
    env.update(cand.env or {})
    if prog.server:
        return _against(run_server_once(prog, cand, env, timeout), reference)
    with tempfile.TemporaryDirectory(prefix="hctune-run-") as tmp:
        report, out, err = Path(tmp, "report"), Path(tmp, "stdout"), Path(tmp, "stderr")
        with open(out, "wb") as fo, open(err, "wb") as fe, \
                (open(prog.stdin, "rb") if prog.stdin else open(os.devnull, "rb")) as fi:
            # its own session, so a hung program and its children can all be killed at once
            proc = subprocess.Popen([str(launcher), str(report), *prog.argv], cwd=prog.cwd,
                                    env=env, stdin=fi, stdout=fo, stderr=fe,
                                    start_new_session=True)
            timed_out = False
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                timed_out = True
            except BaseException:           # Ctrl-C: the program must not outlive us
                _kill_group(proc)
                raise
            if timed_out:
                _kill_group(proc)
            res = proc
        row = {"candidate": cand.label, "allocator": cand.allocator,
               "setting": allocators.setting_key(cand.allocator, cand.setting)
               if cand.setting else None,
               "trial": cand.trial, "problem": None}
        if timed_out:
            row["problem"] = f"timed out after {timeout:g} s"
            return row
        fields = report.read_text().split() if report.exists() else []
        if res.returncode != 0 or len(fields) not in (5, 8):
            tail = err.read_text(errors="replace").strip().splitlines()[-1:] or [""]
            row["problem"] = f"could not be measured: {tail[0][:200]}"
            return row
        wall_ns, user_us, sys_us, rss_kib, status = map(int, fields[:5])
        # the RSS curve (hcrun samples it every few ms): its time-weighted mean and the RSS
        # left at the end; unknown for a run shorter than one sample
        mean_kib, final_kib, samples = map(int, fields[5:]) if len(fields) == 8 else (0, 0, 0)
        row.update(rss_mean_bytes=mean_kib * 1024 if samples else None,
                   rss_final_bytes=final_kib * 1024 if samples else None, rss_samples=samples)
        h = hashlib.sha256()
        with open(out, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        row.update(wall_s=wall_ns / 1e9, user_s=user_us / 1e6, sys_s=sys_us / 1e6,
                   peak_rss_bytes=rss_kib * 1024, exit_status=status,
                   stdout_sha256=h.hexdigest())
        last = (err.read_text(errors="replace").strip().splitlines() or [""])[-1][:160]
    if reference is not None:
        if status > 128 and status != reference["exit_status"]:
            row["problem"] = f"crashed (signal {status - 128})" + (f": {last}" if last else "")
        elif status != reference["exit_status"]:
            row["problem"] = (f"exit status {status}, glibc's {reference['exit_status']}"
                              + (f": {last}" if last else ""))
        elif reference.get("stdout_sha256") and row["stdout_sha256"] != reference["stdout_sha256"]:
            row["problem"] = "output differs from glibc's"
    return row


def run_server_once(prog: Program, cand: Candidate, env: dict,
                    timeout: float | None) -> dict:
    """A server under `cand`: started, ready, loaded (the load outside the candidate), stopped,
    nothing of it left (hctune.profile.run_server). The row: the load's wall time and exit
    status and stdout's sha256 (output checking is on the load's output), the server's CPU time,
    its RSS (every process of its session, sampled every 100 ms over the load: time-weighted
    mean, peak, final) and, under "server", the p95 and the sampled curve."""
    spec_ = _profile.ServerLoad.from_dict(prog.server)
    row = {"candidate": cand.label, "allocator": cand.allocator,
           "setting": allocators.setting_key(cand.allocator, cand.setting)
           if cand.setting else None, "trial": cand.trial, "problem": None}
    with tempfile.TemporaryDirectory(prefix="hctune-run-") as tmp:
        res = _profile.run_server(list(prog.argv), env, spec_, cwd=prog.cwd, workdir=Path(tmp),
                                  timeout=timeout, sample=True)
        rss = res.rss()
        h = hashlib.sha256()
        if res.load_stdout and res.load_stdout.exists():
            h.update(res.load_stdout.read_bytes())
    row.update(wall_s=res.load_wall_s, user_s=res.server_user_s, sys_s=res.server_sys_s,
               peak_rss_bytes=rss["peak"], rss_mean_bytes=rss["mean"],
               rss_final_bytes=rss["final"], rss_samples=rss["samples"],
               exit_status=res.load_status, stdout_sha256=h.hexdigest(),
               server={"rss_p95_bytes": rss["p95"], "status": res.server_status,
                       "killed_after_stop": res.leftovers,
                       "curve": [[round(t, 3), r] for t, r in res.curve]})
    if res.problem:
        row["problem"] = res.problem
    elif not rss["samples"]:
        row["problem"] = "the server's RSS could not be sampled"
    return row


def _against(row: dict, reference: dict | None) -> dict:
    """A server run's row checked against glibc's (the load's exit status and output)."""
    if reference is None or row["problem"]:
        return row
    if row["exit_status"] != reference["exit_status"]:
        row["problem"] = f"the load's exit status {row['exit_status']}, glibc's " \
                         f"{reference['exit_status']}"
    elif reference.get("stdout_sha256") and row["stdout_sha256"] != reference["stdout_sha256"]:
        row["problem"] = "the load's output differs from glibc's"
    return row


def run_rounds(prog: Program, cands: list[Candidate], runs: int, launcher: Path | None = None,
               timeout: float | None = None, seed: int = 0, on_run=None,
               expected_sha256: str | None = None,
               on_round=None, on_warmup=None) -> tuple[list[dict], dict, list[str]]:
    """The measuring loop, without the database: one warm-up run on glibc (whose output and
    exit status become the reference, or `expected_sha256` for the output), then `runs` rounds,
    each running every candidate once in a shuffled order; a candidate is dropped after its
    first bad run. `on_run(row, done, total)` after every run, `on_round(done rounds, rounds,
    this round's rows)` after every round, `on_warmup(seconds)` after the first warm-up run.
    Returns (runs, reference, notes)."""
    launcher = launcher or hcrun()
    glibc = next((c for c in cands if c.label == "glibc"), Candidate("glibc", "reference", "glibc"))
    notes = []
    t0 = time.monotonic()
    first = run_once(launcher, prog, glibc, timeout)
    if first.get("problem"):
        raise HctuneError(f"the program could not be run: {first['problem']}")
    warm = time.monotonic() - t0
    if on_warmup:
        on_warmup(warm)
    reference = {"exit_status": first["exit_status"],
                 "stdout_sha256": expected_sha256 or first["stdout_sha256"]}
    if expected_sha256 is None:
        second = run_once(launcher, prog, glibc, timeout)
        if second.get("stdout_sha256") != first["stdout_sha256"]:
            reference["stdout_sha256"] = None
            notes.append("the program's output differs between two glibc runs: only exit "
                         "statuses are compared")
    if timeout is None:
        timeout = max(60.0, 20 * warm)
    rng = random.Random(seed)
    out_rows, dropped = [], set()
    total, done = runs * len(cands), 0
    for rnd in range(runs):
        order = list(cands)
        rng.shuffle(order)
        for c in order:
            done += 1
            if c.label in dropped:
                continue
            r = run_once(launcher, prog, c, timeout, reference)
            r["round"] = rnd
            out_rows.append(r)
            if r["problem"]:
                dropped.add(c.label)
            if on_run:
                on_run(r, done, total)
        if on_round:
            on_round(rnd + 1, runs, [r for r in out_rows if r["round"] == rnd])
    return out_rows, reference, notes
