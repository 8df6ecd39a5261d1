"""hctune check [--study S] [--tolerance PCT] [--runs N]: re-run a validated answer against the
references it beat, for CI and after upgrades (docs/servers.md, "Keeping the answer true").

The latest finished validation (of the study) names the answer (its recommendation) and, from
its stored real runs, the references the answer beat significantly on the validation's measure
(the 95 % interval of the paired ratio wholly below 1). Those candidates run again, interleaved
(hctune.validate.run_rounds: a server under its load as validated), from the libraries recorded
with the validation. Exit 0 while the answer's median stays within the tolerance of every one of
them; 1 with one line naming which reference now does better, by how much, and what changed in
the libraries since (a path that resolves elsewhere, a new file, a new package version, a new C
library); 2 for bad input."""

from __future__ import annotations

import json
from pathlib import Path

import click

from hctune import validate as _v
from hctune.db import Database
from hctune.errors import HctuneError

DEFAULT_TOLERANCE = 10.0
_NAMES = {"rss_mean_bytes": "mean RSS", "rss_final_bytes": "final RSS", "peak_rss_bytes":
          "peak RSS", "wall_s": "wall time", "cpu_s": "CPU time"}


def _changes(label: str, then: dict, now: dict) -> str | None:
    """What changed in a candidate's library since the validation, in a few words."""
    parts = []
    if then.get("libc_version") != now.get("libc_version"):
        parts.append(f"glibc {then.get('libc_version')} -> {now.get('libc_version')}")
    if then.get("package") and (then.get("package"), then.get("version")) != \
            (now.get("package"), now.get("version")):
        parts.append(f"{then['package']} {then.get('version')} -> "
                     f"{now.get('package') or 'no package'} {now.get('version') or ''}".strip())
    if then.get("resolved") != now.get("resolved"):
        parts.append(f"{then.get('path')} now resolves to {now.get('resolved')}")
    if not parts and then.get("sha256") != now.get("sha256"):
        parts.append(f"{then.get('path')} is another file (sha256 {str(then.get('sha256'))[:12]}"
                     f" -> {str(now.get('sha256'))[:12]})")
    return f"{label}'s library changed: " + "; ".join(parts) if parts else None


def check(db_path, study: str | None = None, tolerance: float = DEFAULT_TOLERANCE,
          runs: int | None = None, progress=None) -> dict:
    """{"holds": bool, "line": the one line, "validation_id", "answer", "against": [...]}."""
    import numpy as np  # deferred: numpy (~0.2 s), only once a check runs
    runs = runs or _v.MIN_RUNS
    if runs < _v.MIN_RUNS:
        raise HctuneError(f"--runs must be at least {_v.MIN_RUNS}")
    if not 0 <= tolerance <= 1000:
        raise HctuneError(f"--tolerance must be a percentage from 0, not {tolerance:g}")
    with Database(db_path) as db:
        v = db.latest_validation(study)
        if v is None:
            raise HctuneError("no finished validation to check"
                              + (f" for study {study}" if study else "")
                              + ": run hctune validate first")
        s = json.loads(v["summary_json"])
        stored = [dict(r) for r in db.real_runs(v["id"])]
    vid, measure = v["id"], s["measure"]
    libs = s.get("libraries")
    if not libs:
        raise HctuneError(f"validation #{vid} predates the recording of its libraries: run "
                          "hctune validate again")
    answer = (s.get("recommendation") or s.get("winner") or {}).get("candidate")
    if answer is None:
        raise HctuneError(f"validation #{vid} has no answer to check")
    by = {}
    for r in stored:
        by.setdefault(r["candidate"], []).append(r)
    rng = np.random.default_rng(0)
    mine = _v._values(by.get(answer, []), measure)
    beaten = {}
    for e in s["candidates"]:
        c = e["candidate"]
        if c == answer or e["disqualified"] or c not in libs:
            continue
        r = _v.ratio_ci(mine, _v._values(by.get(c, []), measure), rng)
        if r and r["ci"][1] < 1:
            beaten[c] = r
    what = _NAMES.get(measure, measure)
    if not beaten:
        line = (f"check: validation #{vid}'s answer {answer} beat no reference significantly on "
                f"{what}: nothing to hold")
        return {"holds": True, "line": line, "validation_id": vid, "answer": answer,
                "against": []}
    cands = []
    for label in [answer, *beaten]:
        e = libs[label]
        lib = e["path"] if e.get("libc_version") is None else None
        cands.append(_v.Candidate(label, e.get("kind") or "extra", e.get("allocator") or
                                  e["path"], Path(lib) if lib else None, e.get("setting"),
                                  env=e.get("env")))
    for c in cands:
        if c.library is not None and not c.library.exists():
            raise HctuneError(f"{c.label}'s library {c.library} is gone (a cleared build cache?):"
                              " run hctune validate again")
    now = _v.libraries(cands)
    changed = {c.label: _changes(c.label, libs[c.label], now[c.label]) for c in cands}
    p = s["program"]
    prog = _v.check_program(_v.Program(p["argv"], p["cwd"], p.get("stdin"), p.get("server")))
    # the validation's reference output (glibc's), when it compared outputs: one warm-up run
    ref_sha = None
    if str(s.get("output_check", "")).startswith("stdout"):
        ref_sha = next((r["stdout_sha256"] for r in stored if r["candidate"] == "glibc"
                        and r["stdout_sha256"]), None)
    restore = _v._terminate_as_interrupt()
    try:
        rows, _, _ = _v.run_rounds(prog, cands, runs, seed=1, on_run=progress,
                                   expected_sha256=ref_sha)
    finally:
        restore()
    fresh = {}
    for r in rows:
        fresh.setdefault(r["candidate"], []).append(r)
    bad = next((r for r in fresh.get(answer, []) if r.get("problem")), None)
    mine_now = _v._values(fresh.get(answer, []), measure)
    against, failed = [], None
    for label, then in beaten.items():
        theirs = fresh.get(label, [])
        r = _v.ratio_ci(mine_now, _v._values(theirs, measure), rng)
        entry = {"candidate": label, "validated": then["ratio"],
                 "now": r["ratio"] if r else None, "change": changed.get(label)}
        against.append(entry)
        if failed is None and r and r["ratio"] > 1 + tolerance / 100:
            failed = entry
    if bad is not None:
        line = (f"check: FAILED: {answer} no longer runs: {bad['problem']}"
                + (f"; {changed[answer]}" if changed.get(answer) else ""))
    elif failed is not None:
        cause = failed["change"] or changed.get(answer) or "no library changed (the program, " \
                                                            "its input or the machine did?)"
        line = (f"check: FAILED: {answer} no longer beats {failed['candidate']} on {what}: "
                f"{failed['now']:.2f}x (validated {failed['validated']:.2f}x, tolerance "
                f"{tolerance:g} %); {cause}")
    else:
        line = (f"check: {answer} still holds (validation #{vid}, {what}, tolerance "
                f"{tolerance:g} %): " + ", ".join(
                    f"{e['now']:.2f}x {e['candidate']} (validated {e['validated']:.2f}x)"
                    for e in against if e["now"] is not None))
    return {"holds": bad is None and failed is None, "line": line, "validation_id": vid,
            "answer": answer, "measure": measure, "against": against}


@click.command("check")
@click.option("--study", "study_name", default=None,
              help="The study whose latest validation to check (default: the latest one).")
@click.option("--tolerance", type=float, default=DEFAULT_TOLERANCE, show_default=True,
              metavar="PCT", help="How much worse than a reference it beat the answer may get.")
@click.option("--runs", type=int, default=None,
              help="Interleaved runs per candidate (default: the least validate takes).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_context
def command(ctx, study_name, tolerance, runs, as_json):
    """Re-run the validated answer against the references it beat; exit 1 if it no longer holds.

    For CI and after upgrades: `hctune check || exit 1` after `apt upgrade` names the library
    that changed (docs/servers.md).
    """
    res = check(ctx.obj["db_path"], study_name, tolerance, runs)
    click.echo(json.dumps(res, indent=2, sort_keys=True) if as_json else res["line"])
    if not res["holds"]:
        raise click.exceptions.Exit(1)
