#!/usr/bin/env python3
"""Multi-threaded allocation benchmark: HC vs glibc, jemalloc, mimalloc and tcmalloc (issue 8).

    .venv/bin/python bench/mt_bench.py [--quick] [--runs 5] [--threads 1,2,4,8]
        [--shapes per-thread,...] [--hc NAME=LIB.so ...] [--allocators glibc,hc-generic,...]
        [--no-callgrind] [--instructions [--instr-runs 3]] [--json FILE] [--out FILE]

The programs are bench/mt/mt_shapes.c (one shape per run, see its header) and bench/mt/mt_pair.c
(instructions per malloc(32)/free pair under callgrind), compiled into build/mt/ with
`cc -O2 -pthread`.  Every shape runs at every thread count under every allocator, injected with
LD_PRELOAD; rounds are interleaved (each round runs every allocator once per cell, in an order
rotated from round to round) so that drift on a shared machine hits all alike.  Reported per
cell: the median over the runs with the min-max spread, the speed relative to glibc (above 1:
faster than glibc) and to mimalloc, and the peak RSS (GNU time's %M: wait4's ru_maxrss would
include this Python process's resident set, which a forked child inherits as its high-water mark).
The timed shapes also get operations per CPU second (the process's user + system time): a thread
waiting for a core or a lock uses none, so other work on the machine disturbs it less.

`--instructions` adds counts that do not depend on the machine's load: each shape but the
false-sharing ones (whose figure is a write loop, not the allocator) runs under callgrind with
--fair-sched=yes, and the report gives the instructions spent inside the allocator per malloc/free
pair (the inclusive cost of the program's calls to malloc, free, calloc and realloc, times two over
the number of those calls) and the whole process's instructions per operation.  --instr-runs
runs per cell (default 3), median and spread: the threads' interleaving changes the counts a
little from run to run.

HC builds: `--hc NAME=PATH.so` (repeatable), or `--hc NAME=set:KNOB=V,...` for the generic
preset with those knobs, compiled by the project's build cache; by default build/libhcmalloc.so
from `make` ("hc-generic") and set:TCACHE_COUNT=0 ("hc-tcache-off").
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ROOT / "bench" / "mt"
TIME = "/usr/bin/time"
CFLAGS = ["-O2", "-g", "-pthread", "-Wall", "-Wextra", "-std=gnu11"]

# shape: (what it measures, AMOUNT for a full run, AMOUNT for --quick, higher is better)
SHAPES = {
    "per-thread": ("each thread allocates, writes and frees its own 16-256 B blocks; "
                   "malloc+free pairs per second", 0.5, 0.15, True),
    "cross-thread": ("a ring of threads: blocks allocated by one thread, freed by the next; "
                     "blocks per second", 0.5, 0.15, True),
    "cross-thread-big": ("the ring with blocks of 512 B-4 KiB (mid sizes); "
                         "blocks per second", 0.5, 0.15, True),
    "producer-consumer": ("one thread allocates, the others free; frees per second",
                          0.5, 0.15, True),
    "mixed": ("malloc/realloc/free of 16 B-4 KiB, a fixed total of operations split over the "
              "threads; seconds", 4_000_000, 1_000_000, False),
    "false-share": ("threads take turns allocating 24 B blocks, then each writes its own; "
                    "ns per write round of 64 blocks per thread", 2_000_000, 400_000, False),
    "false-share-handoff": ("the main thread allocates the blocks alternately for the threads, "
                            "each frees them and allocates again, then writes; ns per round",
                            2_000_000, 400_000, False),
}
PAIR_MODES = ("none", "sleeping", "joined")
# --instructions: AMOUNT under callgrind (about 50 times slower), full and --quick
INSTR_AMOUNT = {"per-thread": (0.5, 0.2), "cross-thread": (0.5, 0.2),
                "cross-thread-big": (0.5, 0.2), "producer-consumer": (0.5, 0.2),
                "mixed": (100_000, 40_000)}
ENTRY_POINTS = {"malloc", "free", "calloc", "realloc"}
BUILT: dict[str, str] = {}  # label: the knobs of an HC build made here ("generic, TCACHE_COUNT=0")


class BenchError(Exception):
    pass


# ---- building ----

def build_programs(out_dir: Path | None = None) -> dict[str, Path]:
    """{name: executable} for every bench/mt/*.c, compiled when the binary is older than it."""
    out_dir = Path(out_dir or ROOT / "build" / "mt")
    out_dir.mkdir(parents=True, exist_ok=True)
    cc = shlex.split(os.environ.get("CC", "cc"))
    programs = {}
    for src in sorted(SOURCES.glob("*.c")):
        exe = out_dir / src.stem
        if not exe.exists() or exe.stat().st_mtime < src.stat().st_mtime:
            tmp = exe.with_name(f".{exe.name}.tmp")
            proc = subprocess.run([*cc, *CFLAGS, "-o", str(tmp), str(src)],
                                  capture_output=True, text=True)
            if proc.returncode != 0:
                raise BenchError(f"cannot compile {src.name}: {proc.stderr.strip()[:500]}")
            tmp.replace(exe)
        programs[src.stem] = exe
    return programs


def hc_build(sets: list[str]) -> Path:
    """The generic preset with these KNOB=VALUE overrides, from the project's build cache."""
    from hctune import knobs
    from hctune.build import build_hc
    return build_hc(knobs.resolve("generic", sets))


def allocators(args) -> dict[str, Path | None]:
    """{label: library or None for glibc}, glibc first."""
    from hctune import allocators as system_allocators
    out: dict[str, Path | None] = {"glibc": None}
    found = system_allocators.installed()
    for name in system_allocators.SYSTEM:
        if name in found:
            out[name] = found[name]
        else:
            print(f"mt_bench: {name} not installed; left out", file=sys.stderr)
    if args.hc:
        for spec in args.hc:
            name, sep, path = spec.partition("=")
            if not sep or not name or not path:
                raise BenchError(f"--hc wants NAME=PATH.so, got {spec!r}")
            if name in out:
                raise BenchError(f"--hc {name}: that name is already taken")
            if path.startswith("set:"):
                try:
                    sets = [x for x in path[4:].split(",") if x]
                    out[name] = hc_build(sets)
                    BUILT[name] = ", ".join(["generic", *sets])
                except Exception as e:  # HctuneError for a bad knob, BuildError, ...
                    raise BenchError(f"--hc {name}: {e}") from None
                continue
            if not Path(path).is_file():
                raise BenchError(f"--hc {name}: no such library {path}")
            out[name] = Path(path).resolve()
    else:
        lib = ROOT / "build" / "libhcmalloc.so"
        if not lib.exists():
            raise BenchError("build/libhcmalloc.so is not built: run `make` first, or give --hc")
        out["hc-generic"] = lib
        if not args.allocators or "hc-tcache-off" in args.allocators:
            try:
                out["hc-tcache-off"] = hc_build(["TCACHE_COUNT=0"])
                BUILT["hc-tcache-off"] = "generic, TCACHE_COUNT=0"
            except Exception as e:  # a missing knob or a build error: say so, go on without
                print(f"mt_bench: no hc-tcache-off build ({e}); left out", file=sys.stderr)
    if args.allocators:
        unknown = [a for a in args.allocators if a not in out]
        if unknown:
            raise BenchError(f"unknown allocator(s) {', '.join(unknown)}; have {', '.join(out)}")
        out = {k: v for k, v in out.items() if k in args.allocators}
    return out


# ---- running ----

LINE = re.compile(r"^shape=\S+ .*rate=\S+ unit=\S+$", re.M)


def parse_line(text: str) -> dict:
    """The program's `key=value ...` line as a dict (numbers converted)."""
    m = LINE.search(text)
    if not m:
        raise BenchError(f"no result line in the output: {text.strip()[:200]!r}")
    out = {}
    for item in m.group(0).split():
        k, _, v = item.partition("=")
        try:
            out[k] = int(v)
        except ValueError:
            try:
                out[k] = float(v)
            except ValueError:
                out[k] = v
    return out


def run_shape(program: Path, lib: Path | None, shape: str, threads: int, amount,
              timeout: float = 300) -> dict:
    """One run: {"rate", "unit", "rss_kib", "rc", ...}; rc != 0 carries "error"."""
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    inject = [f"LD_PRELOAD={lib}"] if lib else []
    with tempfile.TemporaryDirectory(prefix="mt-bench-") as tmp:
        rssfile = Path(tmp) / "rss"
        argv = [TIME, "-o", str(rssfile), "-f", "%M", "env", *inject,
                str(program), shape, str(threads), str(amount)]
        try:
            proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"rc": -1, "error": f"timed out after {timeout:.0f} s"}
        words = rssfile.read_text().split() if rssfile.exists() else []
    result = {"rc": proc.returncode, "rss_kib": int(words[-1]) if words and words[-1].isdigit()
              else 0}
    if proc.returncode != 0:
        result["error"] = (proc.stderr.strip().splitlines() or ["(no message)"])[-1][:200]
        return result
    result.update(parse_line(proc.stdout))
    return result


def callgrind_pair(program: Path, lib: Path | None, mode: str, pairs: int) -> float | None:
    """Instructions per malloc(32)/free pair (callgrind's total Ir / pairs), None on failure."""
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    if lib:
        env["LD_PRELOAD"] = str(lib)
    with tempfile.TemporaryDirectory(prefix="mt-pair-") as tmp:
        out = Path(tmp) / "callgrind.out"
        proc = subprocess.run(["valgrind", "--tool=callgrind", "--collect-atstart=no",
                               f"--callgrind-out-file={out}", str(program), mode, str(pairs)],
                              env=env, capture_output=True, text=True, timeout=600)
        if proc.returncode != 0 or not out.exists():
            return None
        m = re.search(r"^(?:totals|summary):\s+(\d+)", out.read_text(), re.M)
    return int(m.group(1)) / pairs if m else None


def callgrind_calls(text: str, program: str) -> dict:
    """From a callgrind output file's text: the calls the program's own code (object `program`)
    made to the allocator's entry points and their inclusive instructions, and the total.
    {"calls", "alloc_ir", "total_ir"}."""
    names: dict[str, dict[str, str]] = {"ob": {}, "fn": {}}
    ob = cfn = None
    calls = alloc_ir = 0
    total = None
    pending = False
    for line in text.splitlines():
        if pending:  # the cost line after calls=: position, then the inclusive Ir
            pending = False
            words = line.split()
            if len(words) > 1 and ob == program and cfn in ENTRY_POINTS:
                alloc_ir += int(words[1])
            cfn = None
            continue
        key, eq, value = line.partition("=")
        if eq and key in ("ob", "cob", "fn", "cfn"):
            table = names["ob" if key.endswith("ob") else "fn"]
            m = re.match(r"\((\d+)\)\s*(.*)", value)
            if m:
                if m.group(2):
                    table[m.group(1)] = m.group(2)
                value = table.get(m.group(1), "")
            name = os.path.basename(value) if key.endswith("ob") else value
            if key == "ob":
                ob = name
            elif key == "cfn":
                cfn = name
        elif key == "calls" and eq:
            pending = True
            if ob == program and cfn in ENTRY_POINTS:
                calls += int(value.split()[0])
        elif line.startswith(("totals:", "summary:")):
            total = int(line.split()[1])
    return {"calls": calls, "alloc_ir": alloc_ir, "total_ir": total or 0}


def callgrind_shape(program: Path, lib: Path | None, shape: str, threads: int, amount,
                    timeout: float = 600) -> dict:
    """One run of a shape under callgrind --fair-sched=yes: the program's result line plus
    {"calls", "alloc_ir", "total_ir"}; rc != 0 carries "error"."""
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    if lib:
        env["LD_PRELOAD"] = str(lib)
    with tempfile.TemporaryDirectory(prefix="mt-instr-") as tmp:
        out = Path(tmp) / "callgrind.out"
        try:
            proc = subprocess.run(["valgrind", "--tool=callgrind", "--fair-sched=yes",
                                   f"--callgrind-out-file={out}", str(program), shape,
                                   str(threads), str(amount)],
                                  env=env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"rc": -1, "error": f"timed out after {timeout:.0f} s"}
        if proc.returncode != 0 or not out.exists():
            return {"rc": proc.returncode or -1, "error": (proc.stderr.strip().splitlines()
                                                           or ["(no output)"])[-1][:200]}
        result = {"rc": 0, **parse_line(proc.stdout),
                  **callgrind_calls(out.read_text(errors="replace"), program.name)}
    if not result["calls"]:
        return {"rc": -1, "error": "no call to the allocator seen (symbols stripped?)"}
    return result


# ---- reporting ----

def speed_vs(value: float, ref: float, higher_better: bool) -> float | None:
    if not value or not ref:
        return None
    return value / ref if higher_better else ref / value


def fmt_num(x: float) -> str:
    if x >= 1e6:
        return f"{x / 1e6:.3g} M"
    if x >= 1e3:
        return f"{x / 1e3:.3g} k"
    return f"{x:.3g}"


def summarize(runs: list[dict]) -> dict | None:
    good = [r for r in runs if r.get("rc") == 0]
    if len(good) < len(runs) or not good:
        return None
    rates = [r["rate"] for r in good]
    out = {"median": statistics.median(rates), "min": min(rates), "max": max(rates),
           "rss_kib": statistics.median(r["rss_kib"] for r in good), "unit": good[0]["unit"]}
    if "shared" in good[0]:
        out["shared"] = statistics.median(r["shared"] for r in good)
    if all(r.get("cpu") for r in good) and SHAPES.get(good[0].get("shape"), (0, 0, 0, 0))[3]:
        per_cpu = [r["ops"] / r["cpu"] for r in good]
        out.update(cpu_median=statistics.median(per_cpu), cpu_min=min(per_cpu),
                   cpu_max=max(per_cpu))
    return out


def summarize_instructions(runs: list[dict]) -> dict | None:
    """Median and spread of the allocator's instructions per pair and the process's per op."""
    good = [r for r in runs if r.get("rc") == 0]
    if len(good) < len(runs) or not good:
        return None
    pair = [2 * r["alloc_ir"] / r["calls"] for r in good]
    per_op = [r["total_ir"] / r["ops"] for r in good if r.get("ops")]
    return {"pair": statistics.median(pair), "pair_min": min(pair), "pair_max": max(pair),
            "per_op": statistics.median(per_op) if per_op else None}


def ratios(value: float, refs: list[float | None], higher: bool) -> str:
    """" (1.05× / 0.92×)": the speed against each reference, "-" where there is none."""
    parts = [f"{speed_vs(value, ref, higher):.2f}×" if ref else "-" for ref in refs]
    return f" ({' / '.join(parts)})" if any(refs) else ""


def shown(lib: Path) -> str:
    """A library's path relative to the checkout, or its file name if outside it."""
    try:
        return str(lib.resolve().relative_to(ROOT))
    except ValueError:
        return lib.name


def thread_table(allocs, threads, cell) -> list[str]:
    """A table with an allocator a row and a thread count a column: cell(label, threads) is
    the text of one cell; then a blank line."""
    return ["| allocator | " + " | ".join(f"{t} thread{'s' if t > 1 else ''}"
                                          for t in threads) + " |",
            "|---|" + "---:|" * len(threads),
            *(f"| {label} | " + " | ".join(cell(label, t) for t in threads) + " |"
              for label in allocs), ""]


def failed(runs: list[dict]) -> str:
    """The cell of runs of which some failed: the first error."""
    errs = [r.get("error", "") for r in runs if r.get("rc") != 0]
    return f"failed: {errs[0] if errs else '?'}"


def report(results, pair_results, allocs, args, meta, instr=None) -> str:
    threads = args.threads
    lines = [
        f"Made by `{meta['command']}` on {meta['date']} ({meta['machine']}, {meta['cores']} "
        f"cores, load average {meta['load']:.1f} at the start), checkout at commit "
        f"{meta['version']}; {args.runs} interleaved runs per cell, medians with the min-max "
        f"spread; {meta['minutes']:.1f} min in all.",
        "",
        "Each cell: median [min-max] (speed vs glibc / vs mimalloc: above 1 is faster). "
        "HC libraries: " + ", ".join(f"{k} = {BUILT.get(k) or shown(v)}"
                                     for k, v in allocs.items()
                                     if k not in ("glibc", "jemalloc", "mimalloc", "tcmalloc")) + ".",
        "",
    ]

    def of(label, shape, t):
        return summarize(results[(label, shape, t)]) if label in allocs else None

    def refs(label, shape, t, field):   # glibc's and mimalloc's, to compare label with
        return [x[field] if x and field in x and other != label else None
                for other, x in ((o, of(o, shape, t)) for o in ("glibc", "mimalloc"))]

    for shape in args.shapes:
        what, _, _, higher = SHAPES[shape]

        def timed(label, t):
            s = of(label, shape, t)
            if s is None:
                return failed(results[(label, shape, t)])
            return (f"{fmt_num(s['median'])} [{fmt_num(s['min'])}-{fmt_num(s['max'])}]"
                    + ratios(s["median"], refs(label, shape, t, "median"), higher))

        def per_cpu(label, t):
            s = of(label, shape, t)
            if not s or "cpu_median" not in s:
                return ""
            return (f"{fmt_num(s['cpu_median'])} [{fmt_num(s['cpu_min'])}-"
                    f"{fmt_num(s['cpu_max'])}]"
                    + ratios(s["cpu_median"], refs(label, shape, t, "cpu_median"), True))

        def shared(label, t):
            x = of(label, shape, t)
            return f"{x['shared']:.2f}" if x and "shared" in x else ""

        lines += [f"#### {shape}: {what} ({'higher' if higher else 'lower'} is better)", "",
                  *thread_table(allocs, threads, timed)]
        if higher:
            lines += [f"{shape}, operations per CPU second (user + system time of the whole "
                      "process; vs glibc / vs mimalloc):", "",
                      *thread_table(allocs, threads, per_cpu)]
        if shape.startswith("false-share"):
            lines += ["Fraction of the blocks that share a 64-byte cache line with another "
                      "thread's block (the allocator's part in false sharing; exact, no timing):",
                      "", *thread_table(allocs, threads, shared)]
    top = max(threads)
    lines += [f"#### Peak RSS at {top} threads, MiB (median; ratio to glibc)", "",
              "| allocator | " + " | ".join(args.shapes) + " |",
              "|---|" + "---:|" * len(args.shapes)]
    for label in allocs:
        cells = []
        for shape in args.shapes:
            s = summarize(results[(label, shape, top)])
            ref = summarize(results[("glibc", shape, top)]) if "glibc" in allocs else None
            if s is None:
                cells.append("failed")
                continue
            cell = f"{s['rss_kib'] / 1024:.1f}"
            if ref and label != "glibc" and ref["rss_kib"]:
                cell += f" ({s['rss_kib'] / ref['rss_kib']:.2f}×)"
            cells.append(cell)
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines.append("")
    if instr:
        ishapes = [x for x in args.shapes if x in INSTR_AMOUNT]
        lines += ["#### Instructions (callgrind --fair-sched=yes; counts, not times)", "",
                  "Inside the allocator per malloc/free pair (2 × the inclusive instructions of "
                  "the program's calls to malloc, free, calloc and realloc ÷ those calls), median "
                  "[min-max] of the runs, and the whole process's instructions per operation "
                  "(the shape's own work included):", ""]
        for shape in ishapes:
            def counted(label, t):
                runs = instr.get((label, shape, t), [])
                x = summarize_instructions(runs)
                if x is None:
                    return failed(runs)
                cell = f"{x['pair']:.0f} [{x['pair_min']:.0f}-{x['pair_max']:.0f}]"
                return cell + (f"; {x['per_op']:.0f}/op" if x["per_op"] else "")
            lines += [f"{shape}:", "", *thread_table(allocs, threads, counted)]
    if pair_results:
        lines += [f"#### Instructions per malloc(32)/free pair (callgrind, "
                  f"{meta['pairs']} pairs after a warm-up; loop overhead included)", "",
                  "| allocator | no thread ever | a second thread sleeping | "
                  "a second thread joined |", "|---|---:|---:|---:|"]
        for label in allocs:
            cells = [f"{pair_results[(label, m)]:.1f}" if pair_results.get((label, m))
                     is not None else "failed" for m in PAIR_MODES]
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="3 runs, shorter runs, fewer callgrind pairs: a smoke run (minutes)")
    ap.add_argument("--runs", type=int, help="interleaved runs per cell (default 5; quick 3)")
    ap.add_argument("--threads", default="1,2,4,8",
                    type=lambda s: [int(x) for x in s.split(",")])
    ap.add_argument("--shapes", default=",".join(SHAPES), type=lambda s: s.split(","))
    ap.add_argument("--hc", action="append", metavar="NAME=PATH.so",
                    help="an HC build to measure (repeatable): a library, or set:KNOB=V,... "
                         "for the generic preset with those knobs, built here; default: "
                         "build/libhcmalloc.so as hc-generic and set:TCACHE_COUNT=0 as "
                         "hc-tcache-off")
    ap.add_argument("--allocators", type=lambda s: s.split(","),
                    help="only these labels (glibc, jemalloc, mimalloc, tcmalloc, HC names)")
    ap.add_argument("--no-callgrind", action="store_true", help="skip the instructions per pair")
    ap.add_argument("--instructions", action="store_true",
                    help="also count instructions under callgrind --fair-sched=yes: inside the "
                         "allocator per malloc/free pair, and per operation (no false-share "
                         "shapes)")
    ap.add_argument("--instr-runs", type=int, default=3,
                    help="callgrind runs per cell with --instructions (default 3)")
    ap.add_argument("--json", type=Path, help="write every run and the summary here")
    ap.add_argument("--out", type=Path, help="write the Markdown report here too")
    args = ap.parse_args(argv)
    if args.runs is None:
        args.runs = 3 if args.quick else 5
    if args.runs < 1 or args.instr_runs < 1:
        raise BenchError("--runs and --instr-runs must be at least 1")
    if any(t < 1 or t > 256 for t in args.threads):
        raise BenchError("--threads: each count must be 1-256")
    bad = [s for s in args.shapes if s not in SHAPES]
    if bad:
        raise BenchError(f"unknown shape(s) {', '.join(bad)}; have {', '.join(SHAPES)}")
    return args


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def main(argv=None) -> int:
    try:
        args = parse_args(argv)
        if not os.path.exists(TIME):
            raise BenchError(f"needs GNU time at {TIME} (Debian package `time`)")
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from alloc_bench import source_version   # the commit the HC builds came from
        version = source_version()
        programs = build_programs()
        allocs = allocators(args)
    except BenchError as e:
        print(f"mt_bench: error: {e}", file=sys.stderr)
        return 2
    do_callgrind = not args.no_callgrind
    have_valgrind = not subprocess.run(["which", "valgrind"], capture_output=True).returncode
    if (do_callgrind or args.instructions) and not have_valgrind:
        print("mt_bench: valgrind not found; no instruction counts", file=sys.stderr)
        do_callgrind = args.instructions = False
    command = ".venv/bin/python bench/mt_bench.py " + " ".join(
        shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv))
    t0 = time.perf_counter()
    load = os.getloadavg()[0]
    labels = list(allocs)
    results: dict[tuple, list[dict]] = {(a, s, t): [] for a in labels for s in args.shapes
                                        for t in args.threads}
    for r in range(args.runs):
        order = labels[r % len(labels):] + labels[:r % len(labels)]
        print(f"mt_bench: round {r + 1}/{args.runs}", file=sys.stderr)
        for shape in args.shapes:
            amount = SHAPES[shape][2] if args.quick else SHAPES[shape][1]
            for t in args.threads:
                for label in order:
                    results[(label, shape, t)].append(
                        run_shape(programs["mt_shapes"], allocs[label], shape, t, amount))
    instr: dict[tuple, list[dict]] = {}
    if args.instructions:
        for r in range(args.instr_runs):
            order = labels[r % len(labels):] + labels[:r % len(labels)]
            print(f"mt_bench: callgrind round {r + 1}/{args.instr_runs}", file=sys.stderr)
            for shape in [x for x in args.shapes if x in INSTR_AMOUNT]:
                amount = INSTR_AMOUNT[shape][1 if args.quick else 0]
                for t in args.threads:
                    for label in order:
                        instr.setdefault((label, shape, t), []).append(
                            callgrind_shape(programs["mt_shapes"], allocs[label], shape, t,
                                            amount))
    pairs = 20_000 if args.quick else 200_000
    pair_results = {}
    if do_callgrind:
        for label in labels:
            for mode in PAIR_MODES:
                pair_results[(label, mode)] = callgrind_pair(programs["mt_pair"], allocs[label],
                                                             mode, pairs)
    meta = {"command": command.strip(), "date": str(datetime.date.today()),
            "machine": platform.machine(), "cores": os.cpu_count(), "load": load,
            "version": version, "minutes": (time.perf_counter() - t0) / 60, "pairs": pairs}
    text = report(results, pair_results, allocs, args, meta, instr)
    print(text)
    if args.out:
        write_atomic(args.out, text + "\n")
    if args.json:
        doc = {"meta": meta, "allocators": {k: str(v) if v else None for k, v in allocs.items()},
               "runs": [{"allocator": a, "shape": s, "threads": t, "results": rs}
                        for (a, s, t), rs in results.items()],
               "summary": [{"allocator": a, "shape": s, "threads": t, **(summarize(rs) or {})}
                           for (a, s, t), rs in results.items()],
               "instructions_per_pair": [{"allocator": a, "mode": m, "instructions": v}
                                         for (a, m), v in pair_results.items()],
               "instructions": [{"allocator": a, "shape": s, "threads": t, "runs": rs,
                                 **(summarize_instructions(rs) or {})}
                                for (a, s, t), rs in instr.items()]}
        write_atomic(args.json, json.dumps(doc, indent=1) + "\n")
    failed = any(r.get("rc") != 0 for rs in [*results.values(), *instr.values()] for r in rs)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
