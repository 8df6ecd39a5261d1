#!/usr/bin/env python3
"""Time and footprint of HC builds vs glibc (and other allocators) on real programs.

    .venv/bin/python bench/alloc_bench.py [--reps 5] [--presets generic,p2c-mem,...]
                                          [--others] [--workloads python,cc1,...] [--out FILE]
                                          [--lib NAME=PATH ...] [--variant LABEL=K=V,... ...]
                                          [--instructions] [--os-calls]

Every (allocator, workload) pair runs --reps times, interleaved (round r of every pair before
round r+1 of any), so drift on a shared machine hits all allocators alike. Reported per pair:
median wall time and CPU time (user + sys of the child, from wait4), median peak RSS (ru_maxrss),
and for HC its own statistics (HCMALLOC_STATS=PATH): footprint (high-water mark of memory taken
from the OS, the paper's measure) and the most bytes in use. The HC presets are Hasan & Chang
2006 Table 6 (generic) and the distinct settings among its Table 7 rows. With --instructions,
every pair also runs once under callgrind: whole-program instructions, deterministic where
times on a loaded machine are not (they ignore cache misses and page faults; valgrind runs a
program ~50x slower, so pick short workloads). With --os-calls, every pair also runs once
under strace: its mmap/munmap/mprotect/madvise/mremap calls. Their goal, to beat
later: HCgen 10-41 % faster than Doug Lea's allocator (glibc's ancestor) with 0-29 % more memory.
Prints a Markdown report (with the command that made it) to stdout, or writes it to --out
atomically.
"""

from __future__ import annotations

import argparse
import datetime
import os
import shutil
import platform
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import alloc_workloads  # noqa: E402

from hctune import allocators as system_allocators  # noqa: E402
from hctune import knobs  # noqa: E402
from hctune.errors import HctuneError  # noqa: E402

# A child forked from this (large) Python process starts with its resident set, and Linux keeps
# that high-water mark across exec in ru_maxrss, so wait4's figure has this process's RSS as a
# floor. The programs are started by GNU time instead, which forks them from its own small
# process and writes their true peak (%M, KiB) to a file; the allocator is injected by `env`
# between the two, so time itself does not run on it (nor overwrite HCMALLOC_STATS=PATH).
TIME = "/usr/bin/time"


def hc_presets(names: list[str] | None) -> dict[str, dict]:
    """{label: setting}: generic plus one row per distinct Table 7 setting (rows that share a
    setting are named together, e.g. "espresso-perf=cfrac-perf")."""
    chosen = names or knobs.preset_names()
    by_key: dict[str, tuple[list[str], dict]] = {}
    for name in chosen:
        setting = knobs.preset(name)
        by_key.setdefault(knobs.key(setting), ([], setting))[0].append(name)
    return {"=".join(ns): s for ns, s in by_key.values()}


def allocators(args) -> dict[str, dict]:
    """{label: {"lib": path or None, "hc": bool}}, glibc first."""
    from hctune.build import build_hc  # the project's build cache (ARCHITECTURE.md)

    out = {"glibc": {"lib": None, "hc": False}}
    for label, setting in hc_presets(args.presets).items():
        out[f"hc:{label}"] = {"lib": build_hc(setting), "hc": True}
    for item in args.variant:
        label, _, sets = item.partition("=")
        if not label or not sets:
            raise HctuneError(f"--variant {item!r}: expected LABEL=KNOB=VALUE[,KNOB=VALUE...]")
        out[f"hc:{label}"] = {"lib": build_hc(knobs.resolve("generic", sets.split(","))),
                              "hc": True}
    for item in args.lib:
        label, _, path = item.partition("=")
        if not label or not Path(path).is_file():
            raise HctuneError(f"--lib {item!r}: expected NAME=PATH of an existing HC .so")
        out[f"hc:{label}"] = {"lib": Path(path).resolve(), "hc": True}
    if args.others:
        for name, lib in system_allocators.installed().items():
            out[name] = {"lib": lib, "hc": False}
    return out


def read_stats(path: Path) -> dict[str, int]:
    stats = {}
    if path.exists():
        for line in path.read_text().splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[1].isdigit():
                stats[parts[0]] = int(parts[1])
    return stats


def run_measured(workload, alloc, tmp: Path) -> dict:
    """One run: wall time, CPU time (wait4) and peak RSS (GNU time's %M) of the program."""
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    env.pop("HCMALLOC_STATS", None)
    inject = [f"{k}={v}" for k, v in workload.env.items()]
    if alloc["lib"] is not None:
        inject.append(f"LD_PRELOAD={alloc['lib']}")
    statfile, rssfile = tmp / "stats.txt", tmp / "rss.txt"
    statfile.unlink(missing_ok=True)
    if alloc["hc"]:
        inject.append(f"HCMALLOC_STATS={statfile}")
    argv = [TIME, "-o", str(rssfile), "-f", "%M", "env", *inject, *workload.argv]
    with tempfile.TemporaryFile() as out:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, env=env, stdout=out, stderr=out)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        out.seek(0)
        output = out.read()
    rc = os.waitstatus_to_exitcode(status)
    lines = rssfile.read_text().split() if rssfile.exists() else []
    result = {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "minflt": usage.ru_minflt,
              "rss_kib": int(lines[-1]) if lines and lines[-1].isdigit() else 0,
              "rc": rc, "output": output}
    if alloc["hc"]:
        result["stats"] = read_stats(statfile)
    return result


def callgrind(argv: list[str], env: dict, lib: Path | None) -> tuple[int, str]:
    """Whole-program instructions of one run of argv under callgrind, `lib` preloaded (None:
    glibc), and the run's standard output."""
    env = dict(env)
    env.pop("LD_PRELOAD", None)
    if lib is not None:
        env["LD_PRELOAD"] = str(lib)
    res = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
                          *argv], env=env, capture_output=True, text=True)
    m = re.search(r"Collected : (\d+)", res.stderr)
    if res.returncode != 0 or not m:
        raise HctuneError(f"callgrind failed on {Path(argv[0]).name}: {res.stderr[-300:]}")
    return int(m.group(1)), res.stdout


def run_instructions(workload, alloc) -> int:
    """Whole-program instructions of one run of a workload under callgrind."""
    env = dict(os.environ, **workload.env)
    env.pop("HCMALLOC_STATS", None)
    return callgrind(workload.argv, env, alloc["lib"])[0]


OS_CALLS = ("mmap", "munmap", "mprotect", "madvise", "mremap")


def run_os_calls(workload, alloc, tmp: Path) -> int:
    """mmap + munmap + mprotect + madvise + mremap of one run, counted by strace -f -c (brk is not
    counted: glibc grows and trims its heap with it, HC never calls it).  Address randomization
    off (setarch -R), as in tests/test_allocator_os.py: python3's pymalloc arenas come to
    different counts with the layout."""
    env = dict(os.environ, **workload.env)
    env.pop("HCMALLOC_STATS", None)
    env.pop("LD_PRELOAD", None)
    if alloc["lib"] is not None:
        env["LD_PRELOAD"] = str(alloc["lib"])
    out = tmp / "strace.txt"
    fixed = ["setarch", "-R"] if shutil.which("setarch") else []
    res = subprocess.run([*fixed, "strace", "-f", "-c", "-o", str(out), "-e",
                          "trace=" + ",".join(OS_CALLS), *workload.argv],
                         env=env, capture_output=True, text=True)
    if res.returncode != 0:
        raise HctuneError(f"strace failed on {workload.name}: {res.stderr[-300:]}")
    total = 0
    for line in out.read_text().splitlines():
        f = line.split()
        if f and f[-1] in OS_CALLS and len(f) > 3 and f[3].isdigit():
            total += int(f[3])
    return total


def fmt_pct(value: float, ref: float) -> str:
    return f"{(value / ref - 1) * 100:+.0f} %" if ref else "n/a"


def source_version() -> str:
    """The commit the HC builds came from, and whether allocator sources had local changes."""
    root = Path(__file__).resolve().parents[1]
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root,
                              capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "allocator/hc", "templates"],
                               cwd=root, capture_output=True, text=True).stdout.strip()
    except OSError:
        return "unknown"
    return f"{head}{' with local changes to allocator/hc or templates' if dirty else ''}"


def report(results, workloads, allocs, args, elapsed, version, instructions=None,
           os_calls=None) -> str:
    cmd = "bench/alloc_bench.py " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    lines = [
        f"Made by `.venv/bin/python {cmd.strip()}` on {datetime.date.today()} "
        f"({platform.machine()}, {os.cpu_count()} cores, {platform.platform()}), "
        f"HC built from commit {version}, "
        f"{args.reps} interleaved runs per cell, medians; {elapsed / 60:.1f} min in all.",
        "",
        "Columns: wall and CPU (user+sys) time, median (min-max), their change vs glibc "
        "(negative: faster), peak RSS (GNU time's %M) median (min-max) and its change vs glibc, "
        "minor page faults (median); for HC also its own footprint (high-water mark taken from "
        "the OS, Hasan & Chang 2006 §3.11) and the most bytes in use, from HCMALLOC_STATS.",
        "",
    ]
    if args.instructions:
        lines += ["Instructions: whole program under callgrind, one run, and its change vs glibc.",
                  ""]
    if args.os_calls:
        lines += ["OS calls: mmap + munmap + mprotect + madvise + mremap of one run (strace -f -c, "
                  "address randomization off), and its change vs glibc.", ""]
    ins_head = " instructions M | vs glibc |" if args.instructions else ""
    ins_head += " OS calls | vs glibc |" if args.os_calls else ""
    for wl in workloads:
        lines += [f"### {wl.name}: {wl.what}", "",
                  "| allocator | wall s | vs glibc | CPU s | vs glibc | peak RSS MiB | vs glibc "
                  "| minor faults | HC footprint MiB | HC max in use MiB |" + ins_head,
                  "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
                  + ("---:|---:|" if args.instructions else "")
                  + ("---:|---:|" if args.os_calls else "")]
        ref = results[("glibc", wl.name)]
        rw = statistics.median(r["wall"] for r in ref)
        rc = statistics.median(r["cpu"] for r in ref)
        rr = statistics.median(r["rss_kib"] for r in ref)
        for label in allocs:
            runs = results[(label, wl.name)]
            if any(r["rc"] != 0 for r in runs):
                lines.append(f"| {label} | failed (exit {runs[-1]['rc']}) |||||||")
                continue
            w = statistics.median(r["wall"] for r in runs)
            c = statistics.median(r["cpu"] for r in runs)
            m = statistics.median(r["rss_kib"] for r in runs)
            fp = mx = ""
            if allocs[label]["hc"] and runs[0].get("stats"):
                fp = f"{statistics.median(r['stats'].get('footprint', 0) for r in runs) / 2**20:.1f}"
                mx = f"{statistics.median(r['stats'].get('bytes_max', 0) for r in runs) / 2**20:.1f}"
            def spread(key, scale=1.0, fmt="{:.2f}"):
                vals = [r[key] / scale for r in runs]
                return (fmt.format(statistics.median(vals)) + " (" + fmt.format(min(vals)) + "–"
                        + fmt.format(max(vals)) + ")")
            flt = statistics.median(r.get("minflt", 0) for r in runs)
            ins = ""
            if args.instructions:
                n, ref_n = instructions[(label, wl.name)], instructions[("glibc", wl.name)]
                ins = f" {n / 1e6:.0f} | {fmt_pct(n, ref_n)} |"
            if args.os_calls:
                n, ref_n = os_calls[(label, wl.name)], os_calls[("glibc", wl.name)]
                ins += f" {n} | {fmt_pct(n, ref_n)} |"
            lines.append(f"| {label} | {spread('wall')} | {fmt_pct(w, rw)} | {spread('cpu')} "
                         f"| {fmt_pct(c, rc)} | {spread('rss_kib', 1024, '{:.1f}')} "
                         f"| {fmt_pct(m, rr)} | {flt / 1000:.1f} k | {fp} | {mx} |" + ins)
        lines.append("")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--presets", type=lambda s: s.split(","), default=None,
                    help="HC presets (configs/presets.toml); default: all, deduplicated")
    ap.add_argument("--workloads", type=lambda s: s.split(","), default=None)
    ap.add_argument("--others", action="store_true", help="also jemalloc, mimalloc, tcmalloc")
    ap.add_argument("--lib", action="append", default=[], metavar="NAME=PATH",
                    help="also an HC build made elsewhere (e.g. from an older commit); repeatable")
    ap.add_argument("--variant", action="append", default=[], metavar="LABEL=KNOB=V[,KNOB=V]",
                    help="also generic HC with these knobs changed (e.g. "
                         "paper-big=BIG_AO_FIT=0); repeatable")
    ap.add_argument("--out", type=Path, help="write the Markdown report here (atomically)")
    ap.add_argument("--instructions", action="store_true",
                    help="also whole-program instructions under callgrind (one run per pair)")
    ap.add_argument("--os-calls", action="store_true",
                    help="also mmap/munmap/mprotect/madvise/mremap calls under strace (one run "
                         "per pair)")
    args = ap.parse_args(argv)
    if args.reps < 1:
        print("alloc_bench: --reps must be at least 1", file=sys.stderr)
        return 2
    if args.instructions and not shutil.which("valgrind"):
        print("alloc_bench: --instructions needs valgrind", file=sys.stderr)
        return 2
    if args.os_calls and not (shutil.which("strace")):
        print("alloc_bench: --os-calls needs strace", file=sys.stderr)
        return 2
    if not os.path.exists(TIME):
        print(f"alloc_bench: needs GNU time at {TIME} (Debian package `time`)", file=sys.stderr)
        return 2
    version = source_version()  # before building: the sources the builds are made from
    try:
        allocs = allocators(args)
    except HctuneError as e:
        print(f"alloc_bench: {e}", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="alloc-bench-") as tmp:
        tmp = Path(tmp)
        workloads = alloc_workloads.make(tmp / "inputs", args.workloads)
        if not workloads:
            print("alloc_bench: no workload programs found", file=sys.stderr)
            return 2
        results = {(a, w.name): [] for a in allocs for w in workloads}
        expected = {}
        for rep in range(args.reps):
            for wl in workloads:
                for label, alloc in allocs.items():
                    r = run_measured(wl, alloc, tmp)
                    results[(label, wl.name)].append(r)
                    # Same output as under glibc, or the timing means nothing.
                    if r["rc"] == 0 and expected.setdefault(wl.name, r["output"]) != r["output"] \
                            and alloc["lib"] is not None:
                        r["rc"] = "different output"
                    print(f"[{rep + 1}/{args.reps}] {wl.name:8} {label:40} {r['wall']:6.2f} s "
                          f"{r['rss_kib'] / 1024:7.1f} MiB rc={r['rc']}", file=sys.stderr)
        instructions = {}
        if args.instructions:
            try:
                for wl in workloads:
                    for label, alloc in allocs.items():
                        instructions[(label, wl.name)] = run_instructions(wl, alloc)
                        print(f"[callgrind] {wl.name:8} {label:40} "
                              f"{instructions[(label, wl.name)] / 1e6:9.1f} M", file=sys.stderr)
            except HctuneError as e:
                print(f"alloc_bench: {e}", file=sys.stderr)
                return 2
        os_calls = {}
        if args.os_calls:
            try:
                for wl in workloads:
                    for label, alloc in allocs.items():
                        os_calls[(label, wl.name)] = run_os_calls(wl, alloc, tmp)
                        print(f"[strace] {wl.name:8} {label:40} {os_calls[(label, wl.name)]}",
                              file=sys.stderr)
            except HctuneError as e:
                print(f"alloc_bench: {e}", file=sys.stderr)
                return 2
    text = report(results, workloads, allocs, args, time.perf_counter() - t0, version,
                  instructions, os_calls)
    if args.out:
        tmp_out = args.out.with_suffix(args.out.suffix + ".tmp")
        tmp_out.write_text(text + "\n")
        os.replace(tmp_out, args.out)
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
