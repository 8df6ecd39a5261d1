#!/usr/bin/env python3
"""The real-run headline with every allocator in the search: per program, profile input a,
`search --allocators installed` for mem and for perf, then `hctune validate` on input b (real
runs of each allocator's best setting, HC's best, generic HC, glibc, jemalloc, mimalloc,
tcmalloc as they come), and compare the validated winner with the best allocator as it comes.

    .venv/bin/python bench/xalloc_headline.py [--out bench-out/xalloc-headline] [--trials 30]
        [--runs 7] [--top 1] [--scale 1.0] [--memory-measure auto] [PROGRAM ...]

PROGRAMs: wordpool (bench/wordpool.c: a word table beside a churning buffer pool), those of
bench/headline_real.py (gawk groff ghostscript python3 sqlite3 perl xz), and long-running
ones: phased_server (bench/phased_server.c: four threads on the machine's cores serving bursts
of requests with quiet spells between them), phased_service (bench/phased_service.py: a
Python service that loads a cache, evicts most of it and goes on serving), also as
phased_service_t4 (the same script with a pool of four threads), and sqlite_session (Debian's
sqlite3 through a five-phase session: load, index, aggregate, keep 1 in 32 rows, drop and
VACUUM, small queries; see sqlite_session()), sqlite_reports (Debian's sqlite3 keeping a table
and serving report queries whose temporary b-trees and sorters are freed) and python_batch
(Debian's python3 through six batches whose lists and strings are freed, then a tail of small
work); and large heaps, bench/alloc_workloads.py's inputs (the seventh pass): sqlite_big
(Debian's sqlite3 through its 200,000-row script at scale 1, ~360 MiB), cc1 (gcc's cc1 -O2 on its
generated 90-function file at scale 1) and python_containers (python3 building and dropping
containers, 40 rounds at scale 1); default: all. The
batch programs' RSS is what they keep live; the long-running ones also hold memory they freed,
which is where the decay and trim knobs act, so their mem objective is the time-weighted mean
RSS (`--memory-measure auto`: mean for them, peak for the rest) and they have no perf row (their
wall time is mostly their sleeps). Long: a benchmark, never a test. Prints one Markdown table per
objective and writes xalloc-headline.json; every figure comes from the validations stored in
<out>/hctune.db.

Goals of issue 18: on every program the winner is at least as good as the best default on its
objective; mem significantly smaller than the best default on at least half of the programs, by
>= 10 % on at least three; perf significantly faster on at least two. "Significantly" here is
the paired-bootstrap 95 % interval of the ratio to the best default: against glibc the
summary's `vs_glibc`, against another allocator its `vs_recommended` (that default's runs
against the answer's, round by round); where neither exists, the medians' intervals apart.

perf on long programs (`--validate-scale 20 perl gawk`, python3 at 5: searched on short runs,
validated on runs of seconds) and the criterion fixed before that run: `bench/xalloc_counts.py
--help`, which also counts instructions and page faults beside each perf row.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("headline_real", ROOT / "bench" / "headline_real.py")
headline_real = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(headline_real)
_spec = importlib.util.spec_from_file_location("alloc_workloads",
                                               ROOT / "bench" / "alloc_workloads.py")
alloc_workloads = importlib.util.module_from_spec(_spec)
sys.modules["alloc_workloads"] = alloc_workloads    # its dataclass looks its module up
_spec.loader.exec_module(alloc_workloads)

LONG_RUNNING = ("phased_server", "phased_service", "phased_service_t4", "sqlite_session",
                "sqlite_reports", "python_batch")
# large heaps (the seventh pass): bench/alloc_workloads.py's sqlite3 script and gcc's cc1
LARGE = ("sqlite_big", "cc1", "python_containers")
PROGRAMS = ("wordpool", *headline_real.PROGRAMS, *LONG_RUNNING, *LARGE)
DEFAULTS = ("glibc", "jemalloc", "mimalloc", "tcmalloc")
MEASURE = {"mem": "peak_rss_bytes", "perf": "wall_s"}


def sqlite_session(path: Path, seed: int, scale: float):
    """A long sqlite3 session in five phases: load a table of 60,000 rows (x scale, made by a
    recursive query from the seed, so the output is fixed per seed), index, aggregate, keep 1 in
    32 rows, drop the table and VACUUM (the pages go back to the allocator), then 400 small
    range queries on what was kept."""
    n = max(2000, int(60000 * scale))
    lines = ["CREATE TABLE keep(k INTEGER PRIMARY KEY, a INTEGER, v TEXT);"]
    for phase in range(5):
        s = seed * 7 + phase
        lines += [
            "CREATE TABLE t(a INTEGER, b TEXT, c TEXT);",
            f"WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < {n}) "
            f"INSERT INTO t SELECT (x * 7919 + {s}) % 1000003, 'w' || ((x * 31 + {s}) % 5003), "
            f"printf('%.*c', (x * 13 + {s}) % 200 + 10, 'x') FROM c;",
            "CREATE INDEX tb ON t(b);",
            "SELECT b, COUNT(*), SUM(a) FROM t GROUP BY b ORDER BY 2 DESC, 1 LIMIT 3;",
            "SELECT COUNT(DISTINCT c), MAX(a) FROM t;",
            "INSERT INTO keep(a, v) SELECT a, b || c FROM t WHERE a % 32 = 0;",
            "DROP TABLE t;", "VACUUM;"]
        for q in range(400):
            lo = (q * 7919 + s) % max(1, n // 8)
            lines.append(f"SELECT COUNT(*), SUM(length(v)) FROM keep "
                         f"WHERE k BETWEEN {lo} AND {lo + 50};")
    path.write_text("\n".join(lines) + "\n")


def sqlite_reports(path: Path, seed: int, scale: float):
    """sqlite3 as a database that keeps its table and serves reports: load a table of 80,000
    rows (x scale, from the seed), then six rounds of three report queries (a GROUP BY over a
    computed key, a COUNT(DISTINCT) and a sort of the whole table: each builds a temporary
    b-tree or sorter in memory that is freed when the query ends) and 300 lookups by key. The
    table stays; what the allocator gets back is the queries' temporary memory."""
    n = max(2000, int(80000 * scale))
    lines = ["PRAGMA temp_store=MEMORY;",
             "CREATE TABLE r(k INTEGER PRIMARY KEY, g INTEGER, w TEXT, p TEXT);",
             f"WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < {n}) "
             f"INSERT INTO r SELECT x, (x * 7919 + {seed}) % 20011, 'w' || ((x * 31 + {seed}) % 5003), "
             f"printf('%.*c', (x * 13 + {seed}) % 120 + 10, 'y') FROM c;"]
    for rnd in range(6):
        s = seed * 7 + rnd
        lines += [
            f"SELECT (g * {rnd + 3}) % 7919 AS h, COUNT(*), SUM(length(p)), MAX(w) FROM r "
            "GROUP BY h ORDER BY 3 DESC, 1 LIMIT 3;",
            f"SELECT COUNT(DISTINCT w || substr(p, 1, {rnd + 5}) || g) FROM r;",
            f"SELECT k, w FROM r ORDER BY p || w DESC, (k * {s}) % 1009 LIMIT 2 OFFSET {n // 2};"]
        for q in range(300):
            lines.append(f"SELECT w, length(p) FROM r WHERE k = {(q * 7919 + s) % n + 1};")
    path.write_text("\n".join(lines) + "\n")


# python_batch: a batch job in Python: six batches, each parses N generated CSV-like lines into
# lists, sorts them, joins them into one report string and folds them into a small running total
# (kept); the batch's lists and strings are freed; then a tail of small lookups on the totals.
PY_BATCH = """
import random, sys
rng = random.Random(int(sys.argv[1]))
n = int(sys.argv[2])
totals = {}
for batch in range(6):
    rows = [f"{rng.randrange(10**6)},w{rng.randrange(5003)},{'x' * rng.randrange(10, 200)}"
            for _ in range(n)]
    parsed = [r.split(",") for r in rows]
    parsed.sort(key=lambda p: (p[2], p[1]))
    report = "\\n".join(",".join(p) for p in parsed[::3])
    for p in parsed:
        totals[p[1]] = totals.get(p[1], 0) + int(p[0])
    totals[f"len{batch}"] = len(report)
    del rows, parsed, report
hits = 0
for q in range(200000):
    hits += totals.get(f"w{(q * 7919) % 6000}", 0) & 1
print(len(totals), hits)
"""


def command(name: str, out: Path, tag: str, seed: int, scale: float):
    if name == "wordpool":
        exe = out / "wordpool"
        if not exe.exists():
            subprocess.run(["cc", "-O2", "-o", str(exe), str(ROOT / "bench" / "wordpool.c")],
                           check=True)
        return [str(exe), str(out / f"text-{tag}.txt")], {}
    if name == "phased_server":
        exe = out / "phased_server"
        if not exe.exists():
            subprocess.run(["cc", "-O2", "-pthread", "-o", str(exe),
                            str(ROOT / "bench" / "phased_server.c")], check=True)
        return [str(exe), "4", "6", str(max(100, int(6000 * scale))), str(seed)], {}
    if name == "sqlite_session":
        sql = out / f"session-{tag}.sql"
        sqlite_session(sql, seed, scale)       # cheap, and follows --scale
        return ["sqlite3", ":memory:", "-init", str(sql), ".quit"], {}
    if name == "sqlite_reports":
        sql = out / f"reports-{tag}.sql"
        sqlite_reports(sql, seed, scale)
        return ["sqlite3", ":memory:", "-init", str(sql), ".quit"], {}
    if name == "python_batch":
        py = headline_real.command("python3", out, tag, seed, scale)[0][0]
        (out / "batch.py").write_text(PY_BATCH)
        return ([py, str(out / "batch.py"), str(seed), str(max(2000, int(60000 * scale)))],
                {"PYTHONMALLOC": "malloc"})
    if name in ("phased_service", "phased_service_t4"):
        py = headline_real.command("python3", out, tag, seed, scale)[0][0]
        return ([py, str(ROOT / "bench" / "phased_service.py"), str(seed),
                 str(max(1000, int(40000 * scale))), "4" if name.endswith("_t4") else "1"],
                {"PYTHONMALLOC": "malloc"})
    if name == "sqlite_big":
        sql = out / f"big-{tag}.sql"
        sql.write_text(alloc_workloads._sqlite_script(max(1000, int(200_000 * scale))))
        return ["sqlite3", ":memory:", f".read {sql}"], {}
    if name == "cc1":
        cc1 = subprocess.run(["gcc", "-print-prog-name=cc1"], capture_output=True,
                             text=True, check=True).stdout.strip()
        src = out / f"big-{tag}.c"
        src.write_text(alloc_workloads._c_source(max(4, int(90 * scale))))
        return [cc1, "-quiet", "-O2", str(src), "-o", "/dev/null"], {}
    if name == "python_containers":
        py = headline_real.command("python3", out, tag, seed, scale)[0][0]
        script = alloc_workloads.PYTHON_SCRIPT.replace("range(40)",
                                                       f"range({max(2, int(40 * scale))})", 1)
        (out / f"containers-{tag}.py").write_text(script)
        return [py, str(out / f"containers-{tag}.py")], {"PYTHONMALLOC": "malloc"}
    return headline_real.command(name, out, tag, seed, scale)


def measure_of(name: str, asked: str) -> str:
    """The memory measure of `name`'s mem objective: `asked`, or with auto the mean RSS for a
    long-running program and the peak for a batch one."""
    if asked != "auto":
        return asked
    return "mean" if name in LONG_RUNNING else "peak"


def compare(s: dict, objective: str) -> dict:
    """The winner against the best allocator as it comes, from one validation summary (mem: on
    the summary's own measure, peak RSS or the mean or final RSS of the runs' curve)."""
    m = s.get("measure") or MEASURE[objective]
    by = {c["candidate"]: c for c in s["candidates"]}
    rec = s.get("recommendation") or s.get("winner") or {}
    w = by.get(rec.get("candidate"))
    # a default over the study's limit (perf: memory; mem with --max-slowdown: time) is not
    # an answer to it either
    over = {c["candidate"] for c in s["candidates"]
            if c.get("over_memory_limit") or c.get("over_time_limit")} | {
        n.split(" left out of the choice:")[0] for n in s.get("notes", [])
        if " left out of the choice:" in n}
    defaults = [by[d] for d in DEFAULTS if d in by and not by[d]["disqualified"]
                and by[d]["median"].get(m) and d not in over]
    best = min(defaults, key=lambda c: c["median"][m]) if defaults else None
    out = {"winner": w["candidate"] if w else None,
           "winner_allocator": w["allocator"] if w else None,
           "winner_setting": w["setting"] if w else None,
           "best_default": best["candidate"] if best else None,
           # an allocator as it comes (generic HC included) is not a tuned answer: the
           # perf criterion of the fifth and sixth passes does not count it
           "as_it_comes": bool(w and w["kind"] != "tuned")}
    if w and best and w["median"].get(m):
        out["ratio"] = w["median"][m] / best["median"][m]
        lo_w, hi_w = w["ci"][m]
        lo_b, hi_b = best["ci"][m]
        paired = (best.get("vs_recommended") or {}).get(m)   # best default / the answer
        if best["candidate"] == "glibc" and w["vs_glibc"].get(m):
            ci = w["vs_glibc"][m]["ci"]
            out["ci"] = ci
            out["significant"] = ci[1] < 1
        elif paired and paired.get("ci") and best is not w and None not in paired["ci"]:
            # the same paired-bootstrap interval, of the best default against the answer
            lo, hi = paired["ci"]
            out["ci"] = [1 / hi, 1 / lo]
            out["significant"] = lo > 1
        else:
            out["significant"] = hi_w < lo_b     # the medians' intervals apart
        out["same"] = w["candidate"] == best["candidate"]
    return out


def table(results: dict, objective: str) -> str:
    first = next((v[objective] for v in results.values() if v.get(objective)), {})
    what = {"peak_rss_bytes": "peak RSS", "rss_mean_bytes": "mean RSS",
            "rss_final_bytes": "final RSS", "cpu_s": "CPU time"}.get(first.get("measure"),
                                                                      "wall time")
    what = "measure" if objective == "mem" else what
    lines = [f"| program | validated winner | best default | {what} winner / best default "
             "| significant | verdict |", "|---|---|---|---|---|---|"]
    for name, v in results.items():
        s = v.get(objective)
        if not s:
            continue
        c = compare(s, objective)
        r = f"{c['ratio']:.3f}" if c.get("ratio") else "-"
        if c.get("ci"):
            r += f" ({c['ci'][0]:.3f}–{c['ci'][1]:.3f})"
        if objective == "mem":
            r = {"rss_mean_bytes": "mean RSS ", "rss_final_bytes": "final RSS "}.get(
                s.get("measure"), "peak RSS ") + r
        lines.append(f"| {name} | {c['winner']} | {c['best_default']} | {r} | "
                     f"{'yes' if c.get('significant') else 'no'} | {s['verdict']} |")
    return "\n".join(lines)


def goals(results: dict) -> list[str]:
    mem = [compare(v["mem"], "mem") for v in results.values() if v.get("mem")]
    perf = [compare(v["perf"], "perf") for v in results.values() if v.get("perf")]
    every = [c for c in mem + perf if c.get("ratio") is not None]
    at_least = sum(1 for c in every if c["ratio"] <= 1.0 or c.get("same"))
    sig_mem = sum(1 for c in mem if c.get("significant"))
    ten = sum(1 for c in mem if c.get("significant") and c["ratio"] <= 0.9)
    sig_perf = sum(1 for c in perf if c.get("significant"))
    tuned_perf = sum(1 for c in perf if c.get("significant") and not c["as_it_comes"])
    return [f"winner at least as good as the best default (median): {at_least} of {len(every)}",
            f"mem significantly smaller than the best default: {sig_mem} of {len(mem)} "
            f"(goal: at least half)",
            f"mem smaller by >= 10 %, significantly: {ten} (goal: 3)",
            f"perf significantly faster than the best default: {sig_perf} (goal: 2); "
            f"of them a tuned setting, not an allocator as it comes: {tuned_perf}"]


def program_name(name: str) -> str:
    """argparse's type for the xalloc scripts' PROGRAM arguments: one of PROGRAMS."""
    if name not in PROGRAMS:
        raise argparse.ArgumentTypeError(f"unknown program {name}; known: {', '.join(PROGRAMS)}")
    return name


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 epilog=__doc__[__doc__.index("perf on long programs"):])
    ap.add_argument("--out", default="bench-out/xalloc-headline")
    ap.add_argument("--trials", type=int, default=30)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--top", type=int, default=1)
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--validate-scale", type=float, default=None, metavar="SCALE",
                    help="input b's scale (default: --scale): profile and search a short run, "
                         "validate on a long one (perf on programs that run for seconds)")
    ap.add_argument("--objectives", default="mem,perf")
    ap.add_argument("--memory-measure", default="auto", choices=("auto", "peak", "mean", "final"),
                    help="what mem minimises and validation chooses on (search "
                         "--memory-measure); auto: mean for the long-running programs, peak "
                         "for the rest")
    ap.add_argument("--max-slowdown", type=float, default=None, metavar="PCT",
                    help="mem studies: time at most PCT %% over glibc's (search "
                         "--max-slowdown; validation keeps it); the study and the results "
                         "file are named for it")
    ap.add_argument("--time-measure", default="wall", choices=("wall", "cpu"),
                    help="perf: validate chooses on the wall time or on the program's user + sys "
                         "CPU time (validate --time-measure); the results file is named for it")
    ap.add_argument("--tables-only", action="store_true")
    ap.add_argument("programs", nargs="*", default=list(PROGRAMS), type=program_name)
    a = ap.parse_args(argv)
    out = Path(a.out).resolve()
    vscale = a.scale if a.validate_scale is None else a.validate_scale
    objectives = [o for o in a.objectives.split(",") if o]
    # one file per memory measure: a mean run does not mix with a peak one
    slow = f"-slow{a.max_slowdown:g}" if a.max_slowdown is not None else ""
    done = out / ("xalloc-headline" + ("" if a.memory_measure in ("auto", "peak")
                                       else f"-{a.memory_measure}") + slow
                         + ("-cpu" if a.time_measure == "cpu" else "") + ".json")
    results = json.loads(done.read_text()) if done.exists() else {}
    if not a.tables_only:
        out.mkdir(parents=True, exist_ok=True)
        db = out / "hctune.db"
        headline_real.make_inputs(out, "a", 2006, a.scale)
        headline_real.make_inputs(out, "b", 2007, vscale)
        for name in a.programs:
            argv_a, env = command(name, out, "a", 2006, a.scale)
            argv_b, _ = command(name, out, "b", 2007, vscale)
            trace = out / f"{name}.hct"
            if not trace.exists():
                headline_real.hctune(db, "profile", "-o", trace, *argv_a, env=env)
            results.setdefault(name, {})
            for objective in objectives:
                if objective != "mem" and name in LONG_RUNNING:
                    continue            # their wall time is mostly their sleeps
                study = f"x-{name}-{objective}"
                more = []
                measure = measure_of(name, a.memory_measure)
                if objective == "mem" and measure != "peak":
                    study += f"-{measure}"
                    more = ["--memory-measure", measure]
                if objective == "mem" and slow:
                    study += slow
                    more += ["--max-slowdown", f"{a.max_slowdown:g}"]
                headline_real.hctune(db, "search", trace, "--objective", objective,
                                     "--allocators", "installed", "--trials", a.trials,
                                     "--seed", 1, "--study", study, *more)
                timed = ["--time-measure", a.time_measure] if objective != "mem" else []
                s = headline_real.hctune(db, "validate", "--study", study, "--runs", a.runs,
                                         "--top", a.top, *timed, "--json", "--", *argv_b, env=env,
                                         capture=True)
                results[name][objective] = json.loads(s)
                done.write_text(json.dumps(results, indent=1, sort_keys=True))
    print(f"# .venv/bin/python bench/xalloc_headline.py --out {a.out} --trials {a.trials} "
          f"--runs {a.runs} --top {a.top} --scale {a.scale} --objectives {a.objectives} "
          + (f"--validate-scale {a.validate_scale:g} " if a.validate_scale is not None else "")
          + (f"--memory-measure {a.memory_measure} " if a.memory_measure != "auto" else "")
          + (f"--max-slowdown {a.max_slowdown:g} " if slow else "")
          + ("--time-measure cpu " if a.time_measure == "cpu" else "")
          + " ".join(a.programs))
    for objective in objectives:
        print(f"\n## {objective}: the validated winner on input b (searched on input a) against "
              "the best allocator as it comes\n")
        print(table(results, objective))
    print()
    print("\n".join(goals(results)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
