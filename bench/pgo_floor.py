"""Where the floor is (issue 36, criterion 1): could ANY allocator reach 0.95x the smallest
allocator as it comes on the programs of bench/pgo_bench.py?  For each program, on input b:

- the smallest allocator as it comes and the answer (HC generic + the table fitted on input a):
  medians read from pgo_bench's results, WORK/<program>.json (not measured again here);
- non-heap RSS: the program with no work (pgo_bench's own input generator at size 0: lua,
  python3 and perl with 0 items, jq, gawk an empty file, sqlite3 its script with 0 rows asked
  for (the recursive CTE still inserts its one seed row), cc1 the declarations with no function,
  xmllint `<log></log>`) under glibc, peak RSS; and the same run under generic HC with
  HCMALLOC_STATS: its own malloc bytes (bytes_max), counted in both parts of the first term below
  when they live until the peak;
- generic HC on input b with HCMALLOC_STATS: peak RSS, footprint (the most address space HC
  took: an upper bound on malloc's resident memory) and bytes_max (peak live block bytes);
- generic HC on input b again, with bench/pgo_peak_split.c preloaded after it (a thread sampling
  RSS and HC's statistics every 2 ms): the largest, over the samples, of RSS - the address space
  HC holds + HC's live block bytes, i.e. the program's memory outside malloc (at least) plus
  malloc's live blocks at one instant.  The thread makes HC multi-threaded, where blocks its
  threads hold count as in use: the live bytes are capped at the single-threaded run's
  bytes_max, then the classes' rounding taken out at the peak's rate (x live b / bytes_max);
- the floor, the least peak RSS any malloc could give, estimated from below and from above:
  low = max(HC's peak RSS - footprint: a malloc using no memory at all at HC's peak; the sampled
  instant), high = max(low, peak live b + non-heap: a malloc that wastes nothing, if the no-work
  RSS is all the program keeps outside malloc; an estimate, not a bound: bytes malloc'd and
  never touched are not resident, and xmllint's answer is below it).  0.95x the smallest is
  reachable by some allocator if high <= 0.95x, out of reach if low > 0.95x, on the edge between.

    PYTHONPATH=tuner .venv/bin/python bench/pgo_floor.py [--rounds 3] [--only lua,jq]
        [--work /tmp/pgo-bench]

Interleaved rounds, medians (min-max), `nice -n 10` (pgo_bench.run).  Writes WORK/floor.json,
prints two Markdown tables and the command that reproduces it.  About 50 s of CPU per round for
the eight programs.  Input files missing from WORK are generated again by pgo_bench's
make_inputs (same seeds); a program without WORK/<program>.json must be measured first by
pgo_bench.py (its answer and allocators are that run's).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pgo_bench as pb                            # noqa: E402
from pgo_bench import knobs                        # noqa: E402

MIB = 1048576.0


def no_work_argv(work: Path, name: str) -> list[str]:
    """The program's argv at size 0: pgo_bench's generator with n = 0 (files in WORK/nowork)."""
    saved = pb.SIZES[name]
    pb.SIZES[name] = (0, 0)
    try:
        (work / "nowork").mkdir(exist_ok=True)
        return pb.make_inputs(work / "nowork", name, "b")
    finally:
        pb.SIZES[name] = saved


def hc_stats_run(argv, lib, env, path: Path):
    """(peak RSS KiB, md5 of stdout, {field: value}) of argv under lib with HCMALLOC_STATS=path."""
    path.unlink(missing_ok=True)
    rss, _cpu, md5 = pb.run(argv, lib, dict(env or {}, HCMALLOC_STATS=str(path)))
    if not path.exists():
        raise SystemExit(f"{argv[0]} under {lib}: no HCMALLOC_STATS report in {path}")
    stats = {}
    for line in path.read_text().splitlines()[1:]:
        k, v = line.split()
        stats[k] = int(v)
    return rss, md5, stats


def build_split(work: Path) -> Path:
    """bench/pgo_peak_split.c as a preloadable library (HC's statistics struct from the tree)."""
    out = work / "peak_split.so"
    subprocess.run(["cc", "-O2", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC", "-pthread",
                    f"-I{pb.ROOT / 'allocator/hc'}", "-o", str(out),
                    str(pb.ROOT / "bench/pgo_peak_split.c")], check=True)
    return out


def split_run(argv, lib, split, env, path: Path):
    """{name: value} of bench/pgo_peak_split.c's report for argv under lib."""
    path.unlink(missing_ok=True)
    pb.run(argv, f"{lib} {split}", dict(env or {}, SPLIT_OUT=str(path)))
    if not path.exists():
        raise SystemExit(f"{argv[0]} under {lib}: no pgo_peak_split report in {path}")
    return {k: int(v) for k, v in (ln.split() for ln in path.read_text().splitlines())}


def med(xs):
    return statistics.median(xs), min(xs), max(xs)


def _table(intro: str, header: list[str], lines: list[list[str]]) -> None:
    """A Markdown table after its introduction."""
    print(intro + "\n\n| " + " | ".join(header) + " |")
    print("|---" * len(header) + "|")
    for cells in lines:
        print("| " + " | ".join(cells) + " |")


def print_tables(rows: dict) -> None:
    """What was measured per program, then the floor it gives."""
    def c(t):
        return f"{t[0]:.1f} ({t[1]:.1f}-{t[2]:.1f})" if t[2] - t[1] >= 0.05 else f"{t[0]:.1f}"
    _table("Measured here (MiB):",
           ["program", "peak live b (trace)", "non-heap (no work, glibc)", "no-work malloc bytes",
            "HC generic on b: peak RSS", "footprint", "bytes_max",
            "sampled instant: outside malloc + live", "of it malloc's live (rounding out)",
            "sampled peak / VmHWM"],
           [[f"{n}{'' if w['output_as_glibc'] else ' (output differs!)'}",
             f"{w['live_b_mib']:.1f}", c(w['nonheap_mib']), c(w['nowork_live_mib']),
             c(w['hc_rss_mib']), c(w['footprint_mib']), c(w['bytes_max_mib']), c(w['instant']),
             c(w['instant_live_mib']), f"{w['sampled_peak_over_hwm']:.3f}"]
            for n, w in rows.items()])
    _table("\nThe floor (MiB; smallest and answer: pgo_bench's medians; low = max(HC RSS - "
           "footprint, sampled instant), high = max(low, live b + non-heap)):",
           ["program", "smallest as it comes", "answer", "live b + non-heap", "HC RSS - footprint",
            "sampled instant", "floor low-high", "low / smallest", "high / smallest",
            "answer / floor (high-low)", "0.95x reachable by some allocator"],
           [[n, f"{w['smallest']} {w['smallest_mib']:.1f}", f"{w['answer_mib']:.1f}",
             f"{w['live_plus_nonheap']:.1f}", f"{w['rss_minus_footprint']:.1f}",
             f"{w['instant'][0]:.1f}", f"{w['low_mib']:.1f}-{w['high_mib']:.1f}",
             f"{w['low_over_smallest']:.3f}", f"{w['high_over_smallest']:.3f}",
             f"{w['answer_over_high']:.3f}-{w['answer_over_low']:.3f}", w['reachable']]
            for n, w in rows.items()])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", default=",".join(pb.SIZES))
    ap.add_argument("--work", default="/tmp/pgo-bench")
    args = ap.parse_args()
    names = [n for n in args.only.split(",") if n]
    bad = [n for n in names if n not in pb.SIZES]
    if args.rounds < 1 or bad or not names:
        print(f"pgo_floor: --rounds must be >= 1 and --only among {','.join(pb.SIZES)}"
              + (f" (not {','.join(bad)})" if bad else ""), file=sys.stderr)
        return 2
    work = Path(args.work)
    results = {}
    for name in names:
        f = work / f"{name}.json"
        if not f.exists():
            print(f"pgo_floor: no {f}: measure it first with PYTHONPATH=tuner .venv/bin/python "
                  f"bench/pgo_bench.py --rounds 3 --only {name} --work {work}", file=sys.stderr)
            return 2
        results[name] = json.loads(f.read_text())
    load0 = os.getloadavg()
    lib = pb.build(dict(knobs.preset("generic")), work / "libhc-generic-floor.so")
    split = build_split(work)
    envs = {n: ({"GCMODE": "incremental"} if n == "lua" else None) for n in names}
    argv_b = {n: pb.make_inputs(work, n, "b") for n in names}
    argv_0 = {n: no_work_argv(work, n) for n in names}
    meas = {n: {"nowork_rss": [], "nowork_live": [], "hc_rss": [], "footprint": [],
                "bytes_max": [], "md5_ok": [], "split": []} for n in names}
    statf = work / "floor-stats.txt"
    for r in range(args.rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        for n in order:
            m = meas[n]
            rss, _cpu, _md5 = pb.run(argv_0[n], None, envs[n])
            m["nowork_rss"].append(rss)
            _rss, _md5, st = hc_stats_run(argv_0[n], lib, envs[n], statf)
            m["nowork_live"].append(st["bytes_max"])
            rss, md5, st = hc_stats_run(argv_b[n], lib, envs[n], statf)
            ref = results[n]["runs"]["glibc"][0]["md5"]
            m["hc_rss"].append(rss)
            m["footprint"].append(st["footprint"])
            m["bytes_max"].append(st["bytes_max"])
            m["md5_ok"].append(md5 == ref)
            m["split"].append(split_run(argv_b[n], lib, split, envs[n], statf))
        print(f"round {r + 1} of {args.rounds} done", file=sys.stderr, flush=True)
    statf.unlink(missing_ok=True)
    load1 = os.getloadavg()

    rows = {}
    for n in names:
        runs, m = results[n]["runs"], meas[n]
        rss = {c: statistics.median(x["rss_kib"] for x in v) / 1024 for c, v in runs.items()}
        asis = {c: v for c, v in rss.items() if not c.startswith("hc-fitted")}
        small = min(asis, key=asis.get)
        live = results[n]["live_b"] / MIB
        nonheap = med([x / 1024 for x in m["nowork_rss"]])
        nowork_live = med([x / MIB for x in m["nowork_live"]])
        hc = med([x / 1024 for x in m["hc_rss"]])
        fp = med([x / MIB for x in m["footprint"]])
        bmax = med([x / MIB for x in m["bytes_max"]])
        # the sampled instant: with the sampler's thread HC runs multi-threaded, and blocks its
        # threads hold count as in use, so the live bytes are capped at the single-threaded
        # run's bytes_max; then the rounding out at the peak's rate (live b / bytes_max)
        bm = statistics.median(m["bytes_max"])
        keep = min(1.0, results[n]["live_b"] / bm)
        inst_live = [min(x["live_at_bound"], bm) * keep for x in m["split"]]
        inst = med([(x["bound"] - x["live_at_bound"] + lv) / MIB
                    for x, lv in zip(m["split"], inst_live)])
        caught = min(x["rss_max"] / x["hwm"] for x in m["split"])
        t1, t2, t3 = live + nonheap[0], hc[0] - fp[0], inst[0]
        low, high = max(t2, t3), max(t1, t2, t3)
        bound95 = 0.95 * asis[small]
        verdict = "yes" if high <= bound95 else "no" if low > bound95 else "edge"
        rows[n] = {"smallest": small, "smallest_mib": asis[small], "answer_mib": rss["hc-fitted"],
                   "live_b_mib": live, "nonheap_mib": nonheap, "nowork_live_mib": nowork_live,
                   "hc_rss_mib": hc, "footprint_mib": fp, "bytes_max_mib": bmax,
                   "live_plus_nonheap": t1, "rss_minus_footprint": t2, "instant": inst,
                   "instant_live_mib": med([lv / MIB for lv in inst_live]),
                   "sampled_peak_over_hwm": caught, "low_mib": low, "high_mib": high,
                   "low_over_smallest": low / asis[small], "high_over_smallest": high / asis[small],
                   "answer_over_low": rss["hc-fitted"] / low,
                   "answer_over_high": rss["hc-fitted"] / high,
                   "reachable": verdict, "output_as_glibc": all(m["md5_ok"]), "raw": m}
    out = {"rounds": args.rounds, "load_before": load0, "load_after": load1, "rows": rows}
    tmp = work / f"floor.json.tmp.{os.getpid()}"    # whole or not at all
    tmp.write_text(json.dumps(out, indent=1))
    tmp.replace(work / "floor.json")

    print_tables(rows)
    by = {v: [n for n, w in rows.items() if w["reachable"] == v] for v in ("yes", "edge", "no")}
    met = [n for n, w in rows.items() if w["answer_mib"] <= 0.95 * w["smallest_mib"]]
    print(f"\nMiB; {args.rounds} interleaved rounds, medians (min-max where they differ).  0.95x "
          f"the smallest reachable (high <= 0.95x): {', '.join(by['yes']) or 'none'}; on the edge "
          f"(low <= 0.95x < high): {', '.join(by['edge']) or 'none'}; out of reach (low > 0.95x): "
          f"{', '.join(by['no']) or 'none'}.  The answer at <= 0.95x: {', '.join(met) or 'none'}."
          f"  Load {load0[0]:.2f} before, {load1[0]:.2f} after; {os.cpu_count()} cores.")
    print(f"reproduce: PYTHONPATH=tuner .venv/bin/python bench/pgo_floor.py --rounds {args.rounds}"
          f" --only {','.join(names)} --work {args.work}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
