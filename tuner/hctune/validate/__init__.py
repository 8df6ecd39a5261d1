"""Real-run validation: does the replay's winner hold in the real program?

The replay (Hasan & Chang 2006, §4.4) is a prediction; the DMM simulator paper checks every
prediction against the real program, and so does `hctune validate`:

1. candidates: the study's best K distinct settings by its objective (pareto: K points spread
   along the front), generic HC (Table 6, as the search measures it), glibc, and jemalloc,
   mimalloc, tcmalloc when installed (plus any `extra` library);
2. each HC candidate is built through the build cache (hctune.build.build_hc);
3. the program (the profiled command, or another one) runs under each with LD_PRELOAD, in
   interleaved rounds (every candidate once per round, in a shuffled order), N rounds, after one
   warm-up run on glibc; each run is measured by hcrun (a native part; wall time, the child's
   user+sys CPU time and its own ru_maxrss) and stored in hc_real_runs as it finishes;
4. a run whose stdout (sha256) or exit status differs from glibc's, that dies of a signal or
   times out, disqualifies its candidate (which then stops running);
5. medians with 95 % intervals; ratios as the ratio of medians with a paired bootstrap over
   rounds (see `ratio_ci`); on the real measure (mem: peak RSS, or with the study's
   --memory-measure the mean or final RSS of hcrun's RSS curve, among those whose wall time is
   within the study's --max-slowdown when it has one; perf and pareto: wall time among those
   whose peak RSS is within the memory limit; with --time-measure cpu the program's user + sys
   CPU time instead of the wall time) the one rule of `rule.recommend`
   (a candidate must win significantly over every simpler option) gives the recommendation
   among all candidates and the winner among the HC ones (what emit writes); and a verdict
   that names what to use, by how much, and every reference that did better.

Library entry points (the CLI and the web service call these): `validate`, `latest`,
`candidates`, `program_for`, `summarize`, `provenance`.

The package, by concern: `launcher` (hcrun), `program`, `candidates`, `runs` (the measuring
loop), `stats` (bootstrap), `rule` (the winner rule and its words), `summary` (winner and verdict), `store` (provenance; reading back
is `hctune.realruns`); this module runs the whole validation. Every name is importable from `hctune.validate`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import threading

from hctune import knobs as _knobs  # noqa: F401  (re-exported, as before the split)
from hctune.db import Database, now
from hctune.errors import HctuneError
from hctune.trace.register import stats_of
from hctune.search.objective import MEMORY_MEASURES
from hctune.validate.candidates import (DEFAULT_TOP, REFERENCES, Candidate, _distinct, _spread,  # noqa: F401
                                       candidates, tuned_trials)
from hctune.validate.launcher import HCRUN_SOURCE, hcrun, libraries  # noqa: F401
from hctune.validate.program import Program, check_program, program_for  # noqa: F401
from hctune.validate.runs import DEFAULT_RUNS, MIN_RUNS, _kill_group, run_once, run_rounds  # noqa: F401
from hctune.validate.stats import BOOTSTRAP, MEASURES, _median, _values, median_ci, ratio_ci  # noqa: F401
from hctune.realruns import latest, validated, winner_entry, winner_setting  # noqa: F401
from hctune.validate.options import ValidateOptions
from hctune.validate.store import _fmt_measure, provenance  # noqa: F401
from hctune.validate.summary import (DEFAULT_MEMORY_OVERHEAD, TIME_MEASURES, _pct, _span,  # noqa: F401
                                    _verdict, add_headroom, load_notes, load_summary,
                                    summarize)
from hctune.validate import rule


def _limit(row, memory_limit) -> tuple[float | None, bool]:
    """(limit, over the larger of glibc and generic HC) for the winner (perf, pareto): the
    caller's limit (over glibc), else the study's, else the default (over the larger of the
    two, as the search's perf default); none when the search lifted it."""
    if memory_limit is not None:
        return memory_limit, False
    opts = json.loads(row["options_json"] or "{}")
    if opts.get("max_memory_overhead") is not None:
        return opts["max_memory_overhead"], bool(opts.get("memory_vs_generic"))
    if opts.get("memory_limit_default") is False:
        return None, False
    return DEFAULT_MEMORY_OVERHEAD, True


def _terminate_as_interrupt():
    """SIGTERM (and SIGHUP) raise KeyboardInterrupt in the main thread while validating, as
    Ctrl-C does: the run in progress is then killed with its whole process group (runs.run_once
    starts it in its own session, so no signal sent to us reaches it) and the validation is
    marked interrupted, never left `running` with hcrun and the program orphaned. Returns the
    function that puts the previous handlers back; elsewhere (a thread of the service) nothing
    changes."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    def raise_interrupt(signum, frame):
        raise KeyboardInterrupt

    saved = {s: signal.signal(s, raise_interrupt) for s in (signal.SIGTERM, signal.SIGHUP)}
    return lambda: [signal.signal(s, h) for s, h in saved.items()]


# a load that lasts fewer RSS samples (100 ms apart) than this gives a mean RSS close to the
# server's baseline: each sample weighs the time to the next one, the last weighs nothing
MIN_LOAD_SAMPLES = 5


def short_load_note(server_runs: list[dict]) -> str | None:
    """A note when the median run's load was too short for its sampled RSS to mean much."""
    counts = sorted(sum(1 for t, _ in x.get("curve") or () if t >= 0) for x in server_runs)
    if not counts or counts[len(counts) // 2] >= MIN_LOAD_SAMPLES:
        return None
    return (f"the load lasted {counts[len(counts) // 2]} RSS samples (100 ms apart) in the median "
            f"run: its mean RSS is close to the server's baseline whatever the allocator; make "
            f"the load longer (more requests, or an idle phase) for a mean that weighs its heap")


def _max_live(db, row) -> int | None:
    """The largest peak live bytes of the study's traces (their stored statistics), or None."""
    best = None
    for tid in json.loads(row["trace_ids"]):
        t = db.trace(tid)
        try:
            v = stats_of(db, t).get("max_live_bytes") if t is not None else None
        except HctuneError:
            v = None
        if v:
            best = max(best or 0, int(v))
    return best


def validate(db_path, study: str | None = None, top: int = DEFAULT_TOP,
             runs: int = DEFAULT_RUNS, argv: list[str] | None = None, references: bool = True,
             extra=(), memory_limit: float | None = None, timeout: float | None = None,
             progress=None, seed: int = 0, storage: str | None = None,
             objective: str | None = None, memory_measure: str | None = None,
             time_measure: str = "wall", server: dict | None = None,
             min_effect: float = rule.MIN_EFFECT) -> dict:
    """`run` with the options as keywords (see ValidateOptions)."""
    return run(db_path, ValidateOptions(
        study=study, objective=objective, top=top, runs=runs, argv=argv, references=references,
        extra=extra, memory_limit=memory_limit, timeout=timeout, seed=seed, storage=storage,
        memory_measure=memory_measure, time_measure=time_measure, server=server,
        min_effect=min_effect), progress)


def run(db_path, opts: ValidateOptions, progress=None) -> dict:
    """Run the real program under the study's best settings and the references; store every
    run; return the summary (also stored in hc_validations). `progress(event: dict)` is called
    on "build", after every "run" and after every "round" ({"done", "total", "rows"});
    `opts.extra` is [(label, library path[, env])]; `opts.storage`: the study's Optuna storage
    URL when the one hc_studies names lacks its password (workers); `opts.objective` without
    `opts.study`: the latest study of that objective on the latest traces;
    `opts.memory_measure` (peak | mean | final): mem's measure, default the study's;
    `opts.time_measure` (wall | cpu): perf's and pareto's, the wall time or the program's user
    + sys CPU time; `opts.server`: the program is a server loaded as this says
    (profile.ServerLoad's dict; default: as its trace recorded), measured by its RSS over the
    load and the load's time; `opts.min_effect` (%): a significant gain smaller than this keeps
    the simpler option. Progress also gets "plan" ({"candidates", "rounds", "warmups"}) before
    the first run and "warmup" ({"seconds", "runs"}) after the first warm-up run."""
    opts.check()
    study, memory_measure = opts.study, opts.memory_measure
    from hctune.search import results          # deferred: Optuna (see candidates.tuned_trials)
    from hctune.search import study as _study  # deferred: Optuna (see candidates.tuned_trials)
    with Database(db_path) as db:
        if study is None and opts.objective is not None:
            study = results.study_for(db, opts.objective)
        row, st = _study.load(db, study, opts.storage)
        asked = memory_measure or json.loads(row["options_json"] or "{}").get("memory_measure")
        if memory_measure is None:
            memory_measure = json.loads(row["options_json"] or "{}").get("memory_measure",
                                                                         "peak")
        if memory_measure not in MEMORY_MEASURES:
            raise HctuneError(f"--memory-measure: use {', '.join(MEMORY_MEASURES)}, "
                              f"not {memory_measure!r}")
        prog = program_for(db, row, opts.argv, opts.server)
        if prog.server and asked is None:
            memory_measure = "mean"     # a server's cost: its RSS over time (docs/servers.md)
        cands, notes = candidates(db, row, st, opts.top, opts.references, opts.extra, progress)
        launcher = hcrun()
        restore_signals = _terminate_as_interrupt()
        vid = db.add_validation(row["name"], row["objective"], prog.argv, prog.cwd, prog.stdin,
                                opts.runs)
        status = "failed"
        try:
            summary = _run_rounds(db, vid, row, prog, cands, launcher, progress, notes,
                                  dataclasses.replace(opts, memory_measure=memory_measure))
            add_headroom(summary, _max_live(db, row))
            status = "done"
        except KeyboardInterrupt:
            status = "interrupted"
            raise
        finally:
            if status != "done":    # no summary, winner or verdict: never shown as a result
                db.finish_validation(vid, status)
            restore_signals()
        db.finish_validation(vid, "done", summary)
    return summary


def _run_rounds(db, vid, row, prog, cands, launcher, progress, notes,
                opts: ValidateOptions) -> dict:
    runs, timeout, seed = opts.runs, opts.timeout, opts.seed
    loads = [os.getloadavg()[0]]       # the machine's 1-minute load, sampled at every run

    def on_run(r, done, total):
        loads.append(os.getloadavg()[0])
        db.add_real_run(vid, r)     # stored as it finishes: an interrupted validation keeps it
        if progress:
            progress({"event": "run", "done": done, "total": total, "candidate": r["candidate"],
                      "run": r})
    def on_round(done, total, rows):
        if progress:
            progress({"event": "round", "done": done, "total": total, "rows": rows})
    def on_warmup(seconds):
        if progress:
            progress({"event": "warmup", "seconds": seconds, "runs": runs * len(cands)})
    if progress:
        progress({"event": "plan", "candidates": [c.label for c in cands], "rounds": runs,
                  "warmups": 2})
    all_runs, reference, more = run_rounds(prog, cands, runs, launcher, timeout, seed, on_run,
                                           on_round=on_round, on_warmup=on_warmup)
    limit, vs_generic = _limit(row, opts.memory_limit)
    slowdown = json.loads(row["options_json"] or "{}").get("max_slowdown")
    summary = summarize(cands, all_runs, row["objective"], limit, seed, vs_generic,
                        opts.memory_measure, slowdown, opts.time_measure, opts.min_effect)
    summary["load"] = load_summary(loads)
    unsure = load_notes(summary)
    summary["notes"] = notes + more + summary["notes"] + unsure
    if unsure and summary["measure"] in TIME_MEASURES.values():
        summary["verdict"] += "; unsure: " + unsure[0].split(": ", 1)[1].split("; ")[0]
    summary["libraries"] = libraries(cands)     # what `hctune check` names when one changed
    if prog.server:     # each run's sampled RSS curve and p95 ([s since the load began, bytes])
        summary["server_runs"] = [{"candidate": r["candidate"], "round": r["round"],
                                   **r.get("server", {})} for r in all_runs if "server" in r]
        short = short_load_note(summary["server_runs"])
        if short:
            summary["notes"].append(short)
    summary.update(validation_id=vid, study=row["name"], program=prog.to_dict(), runs=runs,
                   output_check=("stdout sha256 and exit status against glibc's"
                                 if reference["stdout_sha256"] else "exit status only"),
                   date=now())
    return summary
