"""Real-run validation: does the replay's winner hold in the real program?

The replay (Hasan & Chang 2006, §4.4) is a prediction; the DMM simulator paper checks every
prediction against the real program, and so does `hctune validate`:

1. candidates: the study's best K distinct settings by its objective (pareto: K points spread
   along the front), generic HC (Table 6, as the search measures it), glibc, and jemalloc,
   mimalloc, tcmalloc when installed (plus any `extra` library);
2. each HC candidate is built through the build cache (hctune.build.build_hc);
3. the program (the profiled command, or another one) runs under each with LD_PRELOAD, in
   interleaved rounds (every candidate once per round, in a shuffled order), N rounds, after one
   warm-up run on glibc; each run is measured by build/cache/.../hcrun (wall time, the child's
   user+sys CPU time and its own ru_maxrss) and stored in hc_real_runs as it finishes;
4. a run whose stdout (sha256) or exit status differs from glibc's, that dies of a signal or
   times out, disqualifies its candidate (which then stops running);
5. medians with 95 % intervals; ratios to generic HC and to glibc as the ratio of medians with
   a paired bootstrap over rounds (see `ratio_ci`); the winner among the HC candidates on the
   real measure (mem: peak RSS; perf and pareto: wall time among those whose peak RSS is within
   the memory limit of glibc's); and a verdict that says whether the difference is significant.

Library entry points (the CLI and the web service call these): `validate`, `latest`,
`candidates`, `program_for`, `summarize`, `provenance`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import random
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from hctune import allocators, paths
from hctune import knobs as _knobs
from hctune.db import Database, now
from hctune.errors import HctuneError
from hctune.search.objective import DEFAULT_PERF_MEMORY_OVERHEAD

MIN_RUNS = 3
DEFAULT_RUNS = 10
DEFAULT_TOP = 3
# perf (and pareto) winners keep peak RSS within this many percent of glibc's unless the study
# or the caller sets another limit (the search's own default for perf, said once there).
DEFAULT_MEMORY_OVERHEAD = DEFAULT_PERF_MEMORY_OVERHEAD
REFERENCES = ("jemalloc", "mimalloc", "tcmalloc")
BOOTSTRAP = 2000
MEASURES = ("wall_s", "cpu_s", "peak_rss_bytes")
HCRUN_SOURCE = paths.ALLOCATOR / "replay" / "hcrun.c"


@dataclasses.dataclass
class Program:
    argv: list[str]
    cwd: str
    stdin: str | None = None

    def to_dict(self) -> dict:
        return {"argv": list(self.argv), "cwd": self.cwd, "stdin": self.stdin}


@dataclasses.dataclass
class Candidate:
    label: str                   # "tuned #1", "hc generic", "glibc", "jemalloc", ...
    kind: str                    # tuned | generic | reference | extra
    allocator: str               # hc | glibc | jemalloc | ... | a library path
    library: Path | None = None  # what LD_PRELOAD gets (None: glibc)
    setting: dict | None = None  # HC only
    trial: int | None = None     # tuned only: the study's trial
    replay: dict | None = None   # the replay's prediction: {"mem_ratio", "perf_ratio"} vs glibc
    env: dict | None = None      # extra environment (tests' broken allocators)

    @property
    def is_hc(self) -> bool:
        return self.kind in ("tuned", "generic")


# ---- the launcher ----

def hcrun() -> Path:
    """build/cache/hcrun-<hash>/hcrun, compiled on first use (statically when possible)."""
    source = HCRUN_SOURCE.read_text()
    from hctune import build
    cc = build.compiler()
    key = hashlib.sha256(f"{source}\0{build.compiler_identity(cc)}".encode()).hexdigest()[:16]
    exe = paths.CACHE / f"hcrun-{key}" / "hcrun"
    if exe.exists():
        return exe
    paths.CACHE.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".hcrun-", dir=paths.CACHE))
    try:
        for extra in (["-static"], []):  # no static libc installed: dynamic, a little bigger
            res = subprocess.run([*shlex.split(cc), "-O2", *extra, str(HCRUN_SOURCE), "-o",
                                  str(tmp / "hcrun")], capture_output=True, text=True, check=False)
            if res.returncode == 0:
                break
        else:
            raise HctuneError(f"cannot compile {HCRUN_SOURCE.name}: "
                              f"{res.stderr.strip().splitlines()[-1] if res.stderr else cc}")
        try:
            os.rename(tmp, exe.parent)
        except OSError:
            if not exe.exists():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return exe


# ---- the program ----

def check_program(prog: Program) -> Program:
    """One-line errors for a program that cannot run: missing, not executable, bad cwd/stdin."""
    if not prog.argv:
        raise HctuneError("no program to run: hctune validate -- PROGRAM ARGS")
    if not os.path.isdir(prog.cwd):
        raise HctuneError(f"the program's working directory {prog.cwd} no longer exists")
    name = prog.argv[0]
    if os.sep in name:
        p = Path(prog.cwd, name)
        if not p.exists():
            raise HctuneError(f"program not found: {name} (in {prog.cwd})")
        if p.is_dir() or not os.access(p, os.X_OK):
            raise HctuneError(f"not an executable program: {name}")
    elif shutil.which(name) is None:
        raise HctuneError(f"program not found: {name}")
    if prog.stdin is not None and not os.path.isfile(prog.stdin):
        raise HctuneError(f"the program's recorded stdin {prog.stdin} no longer exists")
    return prog


def program_for(db: Database, study_row, argv: list[str] | None = None) -> Program:
    """The program to run: `argv` (in the current directory, with stdin when it is a file), or
    the command the study's (latest) profiled trace recorded."""
    if argv:
        from hctune.profile import invocation
        inv = invocation(list(argv))
        return check_program(Program(inv["argv"], inv["cwd"], inv["stdin"]))
    for tid in reversed(json.loads(study_row["trace_ids"])):
        inv = db.invocation(db.trace(tid))
        if inv:
            return check_program(Program(inv["argv"], inv["cwd"], inv["stdin"]))
    raise HctuneError(f"study {study_row['name']}'s traces carry no command to run (imported, or "
                      "profiled by an older hctune); name it: hctune validate -- PROGRAM ARGS")


# ---- the candidates ----

def _distinct(trials, top: int, generic_key: str) -> list:
    seen, out = {generic_key}, []
    for t in trials:
        k = t.user_attrs.get("setting")
        if k and k not in seen:
            seen.add(k)
            out.append(t)
        if len(out) >= top:
            break
    return out


def _spread(front: list, k: int) -> list:
    """k points spread evenly along the front (sorted by memory), ends included."""
    if len(front) <= k:
        return list(front)
    if k == 1:
        return [front[len(front) // 2]]
    idx = sorted({round(i * (len(front) - 1) / (k - 1)) for i in range(k)})
    return [front[i] for i in idx]


def tuned_trials(st, objective: str, top: int) -> list:
    """The study's best `top` distinct settings other than generic: by its objective, or for
    pareto spread along the front (lowest memory first)."""
    from hctune.search import space
    from hctune.search import study as _study
    generic_key = _knobs.key(space.for_search(_knobs.preset("generic")))
    ok = [t for t in _study.finished(st) if _study.feasible(t)]
    if objective == "pareto":
        front = [t for t in _study.pareto_front(st) if t.user_attrs.get("setting") != generic_key]
        return _spread(_distinct(front, len(front), generic_key), top)
    ok.sort(key=lambda t: (t.user_attrs[objective], t.number))
    return _distinct(ok, top, generic_key)


def candidates(db: Database, study_row, st, top: int = DEFAULT_TOP, references: bool = True,
               extra=(), progress=None) -> tuple[list[Candidate], list[str]]:
    """(candidates, notes): built and ready to run; notes say what was left out and why."""
    from hctune.search import space
    from hctune.search import study as _study
    notes = []
    objective = study_row["objective"]
    generic = space.for_search(_knobs.preset("generic"))
    generic_key = _knobs.key(generic)
    done = _study.finished(st)
    if not done:
        raise HctuneError(f"study {study_row['name']} has no finished trial; run `hctune search`")
    gen_trial = next((t for t in done if t.user_attrs.get("setting") == generic_key), None)
    out = []
    for i, t in enumerate(tuned_trials(st, objective, top), 1):
        out.append(Candidate(f"tuned #{i}", "tuned", "hc", setting=_study.trial_setting(t),
                             trial=t.number, replay={"mem_ratio": t.user_attrs["mem"],
                                                     "perf_ratio": t.user_attrs["perf"]}))
    if not out:
        notes.append("the study's best (for pareto: its whole front) is the generic setting: "
                     "there is no other tuned setting to run")
    out.append(Candidate("hc generic", "generic", "hc", setting=generic,
                         trial=gen_trial.number if gen_trial else None,
                         replay={"mem_ratio": gen_trial.user_attrs["mem"],
                                 "perf_ratio": gen_trial.user_attrs["perf"]} if gen_trial else None))
    out.append(Candidate("glibc", "reference", "glibc", replay={"mem_ratio": 1.0,
                                                                "perf_ratio": 1.0}))
    if references:
        for name in REFERENCES:
            try:
                out.append(Candidate(name, "reference", name,
                                     library=allocators.resolve(name).library))
            except HctuneError as e:
                notes.append(f"{name} left out: {e}")
    for item in extra:
        label, lib, env = (tuple(item) + (None,))[:3]
        lib = Path(lib).expanduser().resolve()
        if not lib.is_file():
            raise HctuneError(f"allocator library {lib} does not exist")
        out.append(Candidate(label, "extra", str(lib), library=lib, env=env))
    for c in out:
        if c.is_hc:
            if progress:
                progress({"event": "build", "candidate": c.label})
            c.library = allocators.resolve("hc", c.setting, db=db).library
    return out, notes


# ---- one run ----

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
               "setting": _knobs.key(cand.setting) if cand.setting else None,
               "trial": cand.trial, "problem": None}
        if timed_out:
            row["problem"] = f"timed out after {timeout:g} s"
            return row
        fields = report.read_text().split() if report.exists() else []
        if res.returncode != 0 or len(fields) != 5:
            tail = err.read_text(errors="replace").strip().splitlines()[-1:] or [""]
            row["problem"] = f"could not be measured: {tail[0][:200]}"
            return row
        wall_ns, user_us, sys_us, rss_kib, status = map(int, fields)
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


# ---- statistics ----

def _median(xs):
    xs = sorted(xs)
    n = len(xs)
    return None if n == 0 else (xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2)


def median_ci(xs, rng, level=0.95, b=BOOTSTRAP):
    """Percentile bootstrap interval of the median."""
    import numpy as np
    a = np.asarray(xs, dtype=float)
    if len(a) < 2:
        return [float(a[0]), float(a[0])] if len(a) else [None, None]
    meds = np.median(a[rng.integers(0, len(a), size=(b, len(a)))], axis=1)
    lo, hi = np.quantile(meds, [(1 - level) / 2, (1 + level) / 2])
    return [float(lo), float(hi)]


def ratio_ci(a_by_round: dict, b_by_round: dict, rng, level=0.95, b=BOOTSTRAP):
    """median(a) / median(b) with a paired percentile bootstrap over the rounds both ran: each
    resample draws rounds with replacement and takes both sides' values from the same rounds,
    so a burst of load that slowed one round weighs on both sides alike."""
    import numpy as np
    rounds = sorted(set(a_by_round) & set(b_by_round))
    if not rounds:
        return None
    a = np.asarray([a_by_round[r] for r in rounds], dtype=float)
    bb = np.asarray([b_by_round[r] for r in rounds], dtype=float)
    if np.median(bb) <= 0:
        return None
    ratio = float(np.median(a) / np.median(bb))
    if len(rounds) < 2:
        return {"ratio": ratio, "ci": [ratio, ratio], "rounds": len(rounds)}
    idx = rng.integers(0, len(rounds), size=(b, len(rounds)))
    den = np.median(bb[idx], axis=1)
    boots = np.median(a[idx], axis=1) / np.where(den > 0, den, np.nan)
    lo, hi = np.nanquantile(boots, [(1 - level) / 2, (1 + level) / 2])
    return {"ratio": ratio, "ci": [float(lo), float(hi)], "rounds": len(rounds)}


def _values(runs: list[dict], measure: str) -> dict:
    """{round: value} of a candidate's good runs."""
    out = {}
    for r in runs:
        if r.get("problem") is None and r.get("wall_s") is not None:
            out[r["round"]] = (r["user_s"] + r["sys_s"]) if measure == "cpu_s" else r[measure]
    return out


def _span(a: float, b: float) -> str:
    a, b = round(a) + 0, round(b) + 0     # + 0: no "-0"
    return f"{a}–{b} %" if a >= 0 else f"{a} to {b} %"


def _pct(ratio_entry, faster_word="faster", slower_word="slower") -> str:
    """"7 % faster (CI 4–10 %)" from a ratio with its interval (percent of the other side)."""
    r, (lo, hi) = ratio_entry["ratio"], ratio_entry["ci"]
    if r <= 1:
        return f"{(1 - r) * 100:.0f} % {faster_word} (CI {_span((1 - hi) * 100, (1 - lo) * 100)})"
    return f"{(r - 1) * 100:.0f} % {slower_word} (CI {_span((lo - 1) * 100, (hi - 1) * 100)})"


def summarize(cands: list[Candidate], runs: list[dict], objective: str,
              memory_limit: float | None = DEFAULT_MEMORY_OVERHEAD, seed: int = 0,
              memory_vs_generic: bool = False) -> dict:
    """Medians, intervals, ratios, the winner and the verdict from the stored runs (pure: the
    same runs give the same summary). perf/pareto winners keep median peak RSS within
    `memory_limit` % of glibc's (`memory_vs_generic`: of the larger of glibc's and generic
    HC's)."""
    import numpy as np
    rng = np.random.default_rng(seed)
    by = {c.label: [r for r in runs if r["candidate"] == c.label] for c in cands}
    vals = {c.label: {m: _values(by[c.label], m) for m in MEASURES} for c in cands}
    rows = []
    for c in cands:
        problems = [r["problem"] for r in by[c.label] if r.get("problem")]
        entry = {"candidate": c.label, "kind": c.kind, "allocator": c.allocator,
                 "setting": _knobs.key(c.setting) if c.setting else None, "trial": c.trial,
                 "replay": c.replay, "runs": len(vals[c.label]["wall_s"]),
                 "disqualified": problems[0] if problems else None,
                 "median": {}, "ci": {}, "vs_generic": {}, "vs_glibc": {}}
        generic = next((x.setting for x in cands if x.kind == "generic"), None)
        if c.setting is not None and generic is not None:
            entry["changed_from_generic"] = _knobs.diff_from(c.setting, generic)
        for m in MEASURES:
            xs = list(vals[c.label][m].values())
            entry["median"][m] = _median(xs)
            entry["ci"][m] = median_ci(xs, rng) if xs else [None, None]
            for other, key in (("hc generic", "vs_generic"), ("glibc", "vs_glibc")):
                if other in vals and other != c.label:
                    entry[key][m] = ratio_ci(vals[c.label][m], vals[other][m], rng)
        rows.append(entry)
    measure = "peak_rss_bytes" if objective == "mem" else "wall_s"
    glibc = next((e for e in rows if e["candidate"] == "glibc"), None)
    ok_hc = [e for e in rows if e["kind"] in ("tuned", "generic") and not e["disqualified"]
             and e["median"][measure] is not None]
    notes = []
    eligible = ok_hc
    if measure == "wall_s" and memory_limit is not None and glibc and \
            glibc["median"]["peak_rss_bytes"]:
        base, of = glibc["median"]["peak_rss_bytes"], "glibc's"
        gen = next((e for e in rows if e["kind"] == "generic"), None)
        if memory_vs_generic and gen and gen["median"]["peak_rss_bytes"] and \
                gen["median"]["peak_rss_bytes"] > base:
            base, of = gen["median"]["peak_rss_bytes"], "generic HC's"
        cap = base * (1 + memory_limit / 100)
        within = [e for e in ok_hc if e["median"]["peak_rss_bytes"] <= cap]
        for e in ok_hc:
            if e not in within:
                notes.append(f"{e['candidate']} left out of the choice: peak RSS "
                             f"{e['median']['peak_rss_bytes'] / base:.2f}x {of}, over the "
                             f"+{memory_limit:g} % limit")
        if within:
            eligible = within
        elif ok_hc:
            notes.append("no HC setting is within the memory limit; the fastest is chosen anyway")
    order = {"tuned": 0, "generic": 1}
    winner = min(eligible, key=lambda e: (e["median"][measure], order[e["kind"]],
                                          e["candidate"])) if eligible else None
    verdict, significant = _verdict(winner, rows, measure)
    return {"objective": objective, "measure": measure, "memory_limit_pct": memory_limit,
            "memory_limit_of": "max(glibc, generic HC)" if memory_vs_generic else "glibc",
            "candidates": rows,
            "winner": None if winner is None else {
                "candidate": winner["candidate"], "kind": winner["kind"],
                "setting": winner["setting"], "trial": winner["trial"]},
            "significant": significant, "verdict": verdict, "notes": notes,
            "interval": "95 %: percentile bootstrap of the median; ratios: median over median, "
                        f"paired bootstrap over rounds ({BOOTSTRAP} resamples)"}


def _verdict(winner, rows, measure) -> tuple[str, bool]:
    what = "smaller (peak RSS)" if measure == "peak_rss_bytes" else "faster (wall time)"
    word = "smaller" if measure == "peak_rss_bytes" else "faster"
    bigger = "larger" if measure == "peak_rss_bytes" else "slower"
    if winner is None:
        if not any(e["kind"] in ("tuned", "generic") for e in rows):
            return "no HC setting among the candidates", False
        return "every HC setting was disqualified: none can be recommended for this program", False
    tuned = [e for e in rows if e["kind"] == "tuned"]
    parts, significant = [], False
    if winner["kind"] == "tuned":
        vs = winner["vs_generic"].get(measure)
        if vs and vs["ci"][1] < 1:
            significant = True
            parts.append(f"{winner['candidate']} beats generic HC: {_pct(vs, word, bigger)}")
        elif vs:
            parts.append(f"no setting is significantly {what.split()[0]} than generic HC on this "
                         f"program (best: {winner['candidate']}, {_pct(vs, word, bigger)})")
        else:
            parts.append(f"{winner['candidate']} is best; generic HC could not be compared")
    elif tuned:
        parts.append(f"no tuned setting is {word} than generic HC on this program; "
                     "generic HC is the choice")
    else:
        parts.append("generic HC is the choice")
    g = winner["vs_glibc"].get(measure)
    if g:
        if g["ci"][1] < 1:
            parts.append(f"vs glibc: {_pct(g, word, bigger)}")
        elif g["ci"][0] > 1:
            parts.append(f"vs glibc: {_pct(g, word, bigger)}")
        else:
            parts.append(f"not significantly different from glibc ({g['ratio']:.2f}x, CI "
                         f"{g['ci'][0]:.2f}–{g['ci'][1]:.2f})")
    better = []
    wv = {e["candidate"]: e for e in rows}
    for e in rows:
        if e["kind"] == "reference" and e["candidate"] != "glibc" and not e["disqualified"]:
            a = e["median"][measure]
            if a is not None and winner["median"][measure] and e["ci"][measure][1] is not None \
                    and e["ci"][measure][1] < wv[winner["candidate"]]["ci"][measure][0]:
                better.append(f"{e['candidate']} ({a / winner['median'][measure]:.2f}x)")
    if better:
        parts.append(f"{', '.join(better)} {'is' if len(better) == 1 else 'are'} "
                     f"{word} still")
    return "; ".join(parts), significant


# ---- the whole validation ----

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


def validate(db_path, study: str | None = None, top: int = DEFAULT_TOP,
             runs: int = DEFAULT_RUNS, argv: list[str] | None = None, references: bool = True,
             extra=(), memory_limit: float | None = None, timeout: float | None = None,
             progress=None, seed: int = 0, storage: str | None = None) -> dict:
    """Run the real program under the study's best settings and the references; store every
    run; return the summary (also stored in hc_validations). `progress(event: dict)` is called
    on "build" and after every "run"; `extra` is [(label, library path[, env])]; `storage`: the
    study's Optuna storage URL when the one hc_studies names lacks its password (workers)."""
    if runs < MIN_RUNS:
        raise HctuneError(f"--runs must be at least {MIN_RUNS} (intervals need several runs)")
    if top < 1:
        raise HctuneError("--top must be at least 1")
    from hctune.search import study as _study
    with Database(db_path) as db:
        row, st = _study.load(db, study, storage)
        prog = program_for(db, row, argv)
        cands, notes = candidates(db, row, st, top, references, extra, progress)
        launcher = hcrun()
        vid = db.add_validation(row["name"], row["objective"], prog.argv, prog.cwd, prog.stdin,
                                runs)
        status = "failed"
        try:
            summary = _run_rounds(db, vid, row, prog, cands, runs, launcher, timeout, progress,
                                  seed, memory_limit, notes)
            status = "done"
        except KeyboardInterrupt:
            status = "interrupted"
            raise
        finally:
            if status != "done":
                db.finish_validation(vid, status)
        db.finish_validation(vid, "done", summary)
    return summary


def run_rounds(prog: Program, cands: list[Candidate], runs: int, launcher: Path | None = None,
               timeout: float | None = None, seed: int = 0, on_run=None,
               expected_sha256: str | None = None) -> tuple[list[dict], dict, list[str]]:
    """The measuring loop, without the database: one warm-up run on glibc (whose output and
    exit status become the reference, or `expected_sha256` for the output), then `runs` rounds,
    each running every candidate once in a shuffled order; a candidate is dropped after its
    first bad run. `on_run(row, done, total)` after every run. Returns (runs, reference, notes)."""
    launcher = launcher or hcrun()
    glibc = next((c for c in cands if c.label == "glibc"), Candidate("glibc", "reference", "glibc"))
    notes = []
    t0 = time.monotonic()
    first = run_once(launcher, prog, glibc, timeout)
    if first.get("problem"):
        raise HctuneError(f"the program could not be run: {first['problem']}")
    warm = time.monotonic() - t0
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
    return out_rows, reference, notes


def _run_rounds(db, vid, row, prog, cands, runs, launcher, timeout, progress, seed,
                memory_limit, notes) -> dict:
    def on_run(r, done, total):
        db.add_real_run(vid, r)     # stored as it finishes: an interrupted validation keeps it
        if progress:
            progress({"event": "run", "done": done, "total": total, "candidate": r["candidate"],
                      "run": r})
    all_runs, reference, more = run_rounds(prog, cands, runs, launcher, timeout, seed, on_run)
    limit, vs_generic = _limit(row, memory_limit)
    summary = summarize(cands, all_runs, row["objective"], limit, seed, vs_generic)
    summary["notes"] = notes + more + summary["notes"]
    summary.update(validation_id=vid, study=row["name"], program=prog.to_dict(), runs=runs,
                   output_check=("stdout sha256 and exit status against glibc's"
                                 if reference["stdout_sha256"] else "exit status only"),
                   date=now())
    return summary


# ---- reading back ----

def latest(db_path_or_db, study: str | None = None) -> dict | None:
    """The summary of the latest finished validation (of `study` when given), or None."""
    def read(db):
        row = db.latest_validation(study)
        return json.loads(row["summary_json"]) if row and row["summary_json"] else None
    if isinstance(db_path_or_db, Database):
        return read(db_path_or_db)
    with Database(db_path_or_db) as db:
        return read(db)


def winner_entry(summary: dict) -> dict | None:
    w = (summary or {}).get("winner")
    if not w:
        return None
    return next(e for e in summary["candidates"] if e["candidate"] == w["candidate"])


def _fmt_measure(m, v):
    if v is None:
        return "-"
    return f"{v / 1024:,.0f} KiB" if m == "peak_rss_bytes" else f"{v:.3f} s"


def provenance(summary: dict) -> dict:
    """The real-run evidence for the emitted malloc.c's header."""
    w = winner_entry(summary)
    prog = summary["program"]
    out = {"validated": f"{summary['runs']} interleaved real runs per candidate on "
                        f"{summary['date']} (validation #{summary['validation_id']}), output "
                        f"checked: {summary['output_check']}",
           "program": " ".join(prog["argv"]) + (f" < {prog['stdin']}" if prog["stdin"] else "")
           + f" (in {prog['cwd']})"}
    if w is not None:
        def line(e):
            parts = [f"{m} {_fmt_measure(m, e['median'][m])} (CI "
                     f"{_fmt_measure(m, e['ci'][m][0])}–{_fmt_measure(m, e['ci'][m][1])})"
                     for m in ("wall_s", "peak_rss_bytes")]
            return f"{e['candidate']}: median " + ", ".join(parts)
        out["real runs"] = "; ".join(line(e) for e in summary["candidates"]
                                     if e["candidate"] in (w["candidate"], "hc generic", "glibc"))
        ratios = []
        for key, who in (("vs_generic", "generic HC"), ("vs_glibc", "glibc")):
            for m in ("wall_s", "peak_rss_bytes"):
                r = w[key].get(m)
                if r:
                    ratios.append(f"{m} {r['ratio']:.3f}x {who} (CI {r['ci'][0]:.3f}–"
                                  f"{r['ci'][1]:.3f})")
        out["real ratios"] = "; ".join(ratios) or "-"
    out["verdict"] = summary["verdict"]
    return out


def validated(db: Database, study_row, objective: str | None = None) -> dict | None:
    """The latest finished validation of the study with a winner, when it answers `objective`
    (None, or the study's own objective): what `best`, `emit` and `report` then use."""
    if objective is not None and objective != study_row["objective"]:
        return None
    s = latest(db, study_row["name"])
    return s if s and s.get("winner") else None


def winner_setting(summary: dict) -> dict:
    return _knobs.complete(_knobs.parse_sets(summary["winner"]["setting"].split(",")))
