"""Measure one allocator on one trace with the replay harness (Hasan & Chang 2006, §4.4).

`measure` runs build/hcreplay once (a fresh process per measurement, so no allocator sees
another's heap) with the allocator injected by LD_PRELOAD, and returns the harness's numbers:

  ops                  replayed calls per repeat
  time_ns_per_op       median over repeats of the loop's CPU time, per op; for a trace replayed
                       on threads (replay_threads > 1) the repeat's wall time, all threads
  cpu_ns_per_op        median over repeats of the CPU time, per op (all threads; equal to
                       time_ns_per_op when replayed on one thread)
  threads              distinct threads in the trace
  replay_threads       threads the replay ran on: `threads` (at most 64) with threads="auto",
                       1 with threads="off" (recorded global order on one thread)
  handoffs             ops that waited for another thread (a block it allocated or last used)
  threads_mode         the mode asked ("auto" or "off")
  times_ns             every repeat's loop time (the spread is max/min - 1)
  first_time_ns_per_op the first repeat alone: a fresh heap, as the program had
  instructions_per_op  metric="instructions": callgrind's count of the loop, per op (else None)
  peak_rss_bytes       peak resident memory during the first repeat over the baseline before it
  final_rss_bytes      RSS over the baseline once the first repeat has freed every block
  mean_rss_bytes       the mean of the first repeat's RSS curve over the baseline (sampled every
                       ops/128 ops, each sample weighted by the ops it stands for); rss_samples
  footprint_bytes      HC: its own high-water of memory from the OS (the paper's measure);
                       other allocators: peak_rss_bytes (footprint_source says which)
                       Memory is the first repeat's: it starts from a fresh heap, as the
                       program did (the *_all_repeats_bytes fields hold the high-water over all
                       repeats, which a heap filled and emptied before can push up)
  max_live_bytes       most requested bytes live at once in the trace
  fragmentation        footprint_bytes / max_live_bytes - 1 (the measure of Zorn & Grunwald's
                       comparison of nine mallocs, used by Hasan & Chang)
"""

from __future__ import annotations

import json
import re
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from hctune import allocators, native
from hctune.errors import HctuneError

METRICS = ("time", "instructions")
THREAD_MODES = ("auto", "off")  # auto: a multi-threaded trace is replayed on threads


class ReplayError(HctuneError):
    """The harness could not replay the trace (bad trace, crashed allocator, timeout)."""


class ReplayStopped(HctuneError):
    """The replay was stopped because its caller asked (should_stop: a search's deadline)."""


class ReplayPruned(HctuneError):
    """The harness ended the replay early because it passed a bound it was given (max_rss_bytes,
    max_cpu_seconds): the setting has already lost. `partial`: what it had measured."""

    def __init__(self, message: str, partial: dict | None = None):
        super().__init__(message)
        self.partial = partial or {}


PRUNED_EXIT = 3   # hcreplay's exit status when a bound ended it (HCR_PRUNED_EXIT)

# how often a running replay asks should_stop (seconds): a deadline ends it within about this
STOP_POLL = 0.25


def harness() -> Path:
    """The replay harness: the checkout's build/hcreplay, or compiled into the user cache."""
    return native.path("hcreplay")


def _check_trace(trace) -> Path:
    p = Path(trace)
    if not p.exists():
        raise HctuneError(f"trace {trace} does not exist")
    if p.is_dir():
        raise HctuneError(f"trace {trace} is a directory, not a trace file")
    return p


def _run_polled(cmd: list[str], env: dict, timeout: float | None, should_stop):
    """subprocess.run's (returncode, stdout, stderr), asking should_stop() every STOP_POLL
    seconds: True kills the run (ReplayStopped)."""
    started = time.monotonic()
    with subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as p:
        while True:
            try:
                out, err = p.communicate(timeout=STOP_POLL)
                return p.returncode, out, err
            except subprocess.TimeoutExpired:
                pass
            late = timeout is not None and time.monotonic() - started > timeout
            if late or should_stop():
                p.kill()
                p.communicate()
                if late:
                    raise subprocess.TimeoutExpired(cmd, timeout)
                raise ReplayStopped("the replay was stopped (asked to end)")


def _run(cmd: list[str], env: dict, what: str, timeout: float | None,
         should_stop=None) -> str:
    try:
        if should_stop is None:
            res = subprocess.run(cmd, env=env, capture_output=True, timeout=timeout,
                                 check=False)
            code, out, err = res.returncode, res.stdout, res.stderr
        else:
            code, out, err = _run_polled(cmd, env, timeout, should_stop)
    except subprocess.TimeoutExpired:
        raise ReplayError(f"{what}: no result within {timeout:g} s") from None
    except OSError as e:
        raise ReplayError(f"{what}: cannot run {cmd[0]}: {e}") from None
    # a traced command line need not be UTF-8: never fail on decoding
    stdout = out.decode("utf-8", "replace")
    stderr = err.decode("utf-8", "replace")
    res = subprocess.CompletedProcess(cmd, code, out, err)
    if res.returncode == PRUNED_EXIT:
        try:
            partial = json.loads(stdout)
        except ValueError:
            partial = {}
        if isinstance(partial, dict) and partial.get("pruned"):
            what_ = {"rss": f"RSS {partial.get('rss_bytes', 0) / 2**20:.1f} MiB passed the "
                            f"bound of {partial.get('max_rss_bytes', 0) / 2**20:.1f} MiB",
                     "cpu": f"CPU {partial.get('cpu_ns', 0) / 1e9:.2f} s passed the bound "
                            f"of {partial.get('max_cpu_ns', 0) / 1e9:.2f} s"}
            raise ReplayPruned(f"{what}: ended early after {partial.get('ops_done', 0):,} ops: "
                               + what_.get(partial["pruned"], str(partial["pruned"])), partial)
    if res.returncode != 0:
        lines = [ln for ln in stderr.strip().splitlines() if ln.strip()]
        msg = next((ln.split("error: ", 1)[1] for ln in lines if "hcreplay: error: " in ln), None)
        if msg is None:
            how = (f"killed by signal {-res.returncode}" if res.returncode < 0
                   else f"exit status {res.returncode}")
            msg = f"the replay failed ({how})" + (f": {lines[-1][:300]}" if lines else "")
        raise ReplayError(f"{what}: {msg}")
    return stdout


def _callgrind_total(path: Path) -> int:
    """Instructions (Ir) of the instrumented part: callgrind's `totals:` (or `summary:`)."""
    text = path.read_text(errors="replace")
    for key in ("totals:", "summary:"):
        m = re.search(rf"^{key}\s+(\d+)", text, re.M)
        if m:
            return int(m.group(1))
    raise ReplayError(f"no instruction total in callgrind output {path}")


def count_instructions(trace, alloc: allocators.Allocator, timeout: float | None = 1800.0,
                       touch: bool = True, threads: str = "auto") -> dict:
    """One repeat under callgrind with only the replay loop instrumented (the harness turns
    instrumentation on and off around it): a deterministic cost, the same on every run."""
    valgrind = shutil.which("valgrind")
    if not valgrind:
        raise HctuneError("--metric instructions needs valgrind; install the Debian package "
                          "valgrind")
    with tempfile.TemporaryDirectory(prefix="hctune-cg-") as d:
        out = Path(d) / "callgrind.out"
        cmd = [valgrind, "--tool=callgrind", "--instr-atstart=no", "--dump-instr=no",
               f"--callgrind-out-file={out}", str(harness()), str(trace), "--repeat", "1",
               "--json", "--threads", threads] + ([] if touch else ["--no-touch"])
        text = _run(cmd, alloc.env(), f"callgrind replay of {trace} on {alloc.name}", timeout)
        result = json.loads(text)
        if not result.get("callgrind"):
            raise HctuneError("build/hcreplay was built without valgrind's headers; "
                              "install valgrind and run `make` again")
        result["instructions"] = _callgrind_total(out)
    return result


DEFAULT_TIMEOUT = 1800.0  # seconds per harness run: a hung allocator fails, not the search


def measure(trace, allocator: str = "hc", setting: dict | None = None, repeat: int = 5,
            metric: str = "time", touch: bool = True, timeout: float | None = DEFAULT_TIMEOUT,
            debug: bool = False, db=None, threads: str = "auto", should_stop=None,
            ops: int | None = None, max_rss_bytes: int | None = None,
            max_cpu_seconds: float | None = None, until_spread: float | None = None,
            footprint: bool = False) -> dict:
    """Replay `trace` on `allocator` (for hc: `setting`, default the generic preset) and return
    the numbers listed in this module's docstring.  metric="instructions" adds a callgrind run
    of one repeat (time and memory still come from the native run).  threads="auto" replays a
    multi-threaded trace on threads, "off" on one thread in recorded order (docs/replay.md).
    should_stop: asked about every STOP_POLL s while the harness runs; True kills it and raises
    ReplayStopped (a search's --timeout deadline).
    ops: replay only the trace's first `ops` ops (a part of it; `trace_ops` says how many the
    whole has).  max_rss_bytes (RSS over the baseline), max_cpu_seconds: bounds past which the
    replay ends early and ReplayPruned is raised (a search's setting that has already lost).
    until_spread: `repeat` is the most; the harness stops once two repeats in a row are within
    this fraction of each other (time repeats only while they disagree).
    footprint: a measurement of HC's footprint alone: HC is built by the cheaper recipe that
    cannot change it (hctune.build.FOOTPRINT_CFLAGS), so its time and RSS are not the -O2
    library's; the result says so (footprint_build)."""
    if metric not in METRICS:
        raise HctuneError(f"unknown metric {metric!r}; use one of {', '.join(METRICS)}")
    if threads not in THREAD_MODES:
        raise HctuneError(f"unknown threads mode {threads!r}; use one of "
                          f"{', '.join(THREAD_MODES)}")
    if not isinstance(repeat, int) or not 1 <= repeat <= 1000:
        raise HctuneError(f"repeat must be a whole number from 1 to 1000, not {repeat!r}")
    path = _check_trace(trace)
    alloc = allocators.resolve(allocator, setting, debug=debug, db=db, footprint=footprint)
    cmd = [str(harness()), str(path), "--repeat", str(repeat), "--json", "--threads", threads]
    if not touch:
        cmd.append("--no-touch")
    if ops is not None:
        cmd += ["--ops", str(int(ops))]
    if max_rss_bytes is not None:
        cmd += ["--max-rss", str(max(1, int(max_rss_bytes)))]
    if max_cpu_seconds is not None:
        cmd += ["--max-cpu-seconds", f"{max(1e-3, float(max_cpu_seconds)):.6f}"]
    if until_spread is not None:
        cmd += ["--until-spread", f"{float(until_spread):.6f}"]
    what = f"replay of {trace} on {alloc.name}"
    try:
        result = json.loads(_run(cmd, alloc.env(), what, timeout, should_stop))
    except json.JSONDecodeError as e:
        raise ReplayError(f"{what}: unreadable harness output ({e})") from None
    result["instructions"] = None
    if metric == "instructions":
        counted = count_instructions(path, alloc, timeout, touch, threads)
        result["instructions"] = counted["instructions"]
    if footprint and allocators.of(allocator).compiled:
        result["footprint_build"] = True
    return finish(result, alloc, metric)


def finish(result: dict, alloc: allocators.Allocator, metric: str) -> dict:
    """Add the derived numbers and what was measured to the harness's JSON."""
    ops = result["ops"]
    times = result["times_ns"]
    result["allocator"] = alloc.name
    result["library"] = str(alloc.library) if alloc.library else None
    result["setting"] = alloc.setting
    if alloc.variables:
        result["variables"] = dict(alloc.variables)
    result["metric"] = metric
    result["time_ns_per_op"] = result["median_ns"] / ops  # full precision (C prints 4 places)
    result["cpu_ns_per_op"] = result.get("cpu_median_ns", result["median_ns"]) / ops
    result.setdefault("replay_threads", 1)
    result["instructions_per_op"] = (result["instructions"] / ops
                                     if result.get("instructions") is not None else None)
    result["spread"] = max(times) / min(times) - 1 if min(times) > 0 else None
    result["time_ns_per_op_mean"] = statistics.fmean(times) / ops
    # the first repeat starts from a fresh heap, as the program did; later ones from a heap
    # that has been filled and emptied once
    result["first_time_ns_per_op"] = times[0] / ops
    hc = result.get("hc_footprint_bytes")
    if hc is not None:
        result["footprint_bytes"], result["footprint_source"] = hc, "hc_stats"
    else:
        result["footprint_bytes"], result["footprint_source"] = result["peak_rss_bytes"], "rss"
    live = result["max_live_bytes"]
    fp = result["footprint_bytes"]
    result["fragmentation"] = fp / live - 1 if live and fp is not None else None
    return result


def spread(times) -> float:
    """max/min - 1 of a list of repeat times: how far apart the repeats were."""
    return max(times) / min(times) - 1 if times and min(times) > 0 else float("nan")


def summary(r: dict) -> str:
    """A few human lines about one measurement."""
    kib = lambda b: f"{b / 1024:,.0f} KiB" if b is not None else "—"  # noqa: E731
    lines = [f"{r['trace']} on {r['allocator']}: {r['ops']:,} ops x {r['repeat']} repeats",
             f"  time          {r['time_ns_per_op']:.2f} ns/op (median; spread "
             f"{r['spread'] * 100:.1f}%)" if r.get("spread") is not None else
             f"  time          {r['time_ns_per_op']:.2f} ns/op"]
    if r.get("instructions_per_op") is not None:
        lines.append(f"  instructions  {r['instructions_per_op']:.1f} per op (callgrind)")
    lines.append(f"  peak RSS      {kib(r['peak_rss_bytes'])} over the baseline")
    if r.get("hc_footprint_bytes") is not None:
        lines.append(f"  HC footprint  {kib(r['hc_footprint_bytes'])}")
    lines.append(f"  max live      {kib(r['max_live_bytes'])}; fragmentation "
                 f"{r['fragmentation']:.3f}" if r.get("fragmentation") is not None else
                 f"  max live      {kib(r['max_live_bytes'])}")
    if r.get("replay_threads", 1) > 1:
        lines.append(f"  {r['threads']} threads, replayed on {r['replay_threads']} threads "
                     f"({r.get('handoffs', 0):,} hand-offs between them); time is wall time, "
                     f"CPU {r['cpu_ns_per_op']:.2f} ns/op")
    elif r.get("threads", 1) > 1:
        lines.append(f"  {r['threads']} threads, replayed in recorded order on one thread")
    return "\n".join(lines)
