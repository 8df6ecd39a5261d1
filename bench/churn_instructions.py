#!/usr/bin/env python3
"""Whole-program instructions (callgrind) and HC's footprint of bench/churn_words.c, the
small-object program of issue 17, under glibc, jemalloc, mimalloc, tcmalloc and HC builds.

    .venv/bin/python bench/churn_instructions.py [--rounds 100000] [--variant LABEL=K=V,...]

Instruction counts are deterministic (same build, same program, same count), unlike times on a
shared machine; they ignore cache misses and page faults. HC's footprint and most bytes in use
come from HCMALLOC_STATS (the run outside callgrind, also deterministic). HC generic is always
measured, and by default also with the paper's big list (BIG_AO_FIT=0).
Prints a Markdown table and the command that made it.
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from alloc_bench import callgrind, read_stats  # noqa: E402

from hctune import allocators as system_allocators  # noqa: E402
from hctune import knobs  # noqa: E402
from hctune.build import build_hc  # noqa: E402
from hctune.errors import HctuneError  # noqa: E402

HERE = Path(__file__).resolve().parent


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=100_000)
    ap.add_argument("--variant", action="append", default=None, metavar="LABEL=K=V[,K=V]",
                    help="HC generic with these knobs (default: paper-big=BIG_AO_FIT=0)")
    args = ap.parse_args(argv)
    if args.rounds < 1:
        print("churn_instructions: --rounds must be at least 1", file=sys.stderr)
        return 2
    variants = args.variant if args.variant is not None else ["paper-big=BIG_AO_FIT=0"]
    try:
        libs: dict[str, Path | None] = {"glibc": None, "hc:generic": build_hc(knobs.preset("generic"))}
        for item in variants:
            label, _, sets = item.partition("=")
            if not label or not sets:
                raise HctuneError(f"--variant {item!r}: expected LABEL=KNOB=VALUE[,KNOB=VALUE...]")
            libs[f"hc:{label}"] = build_hc(knobs.resolve("generic", sets.split(",")))
        libs.update(system_allocators.installed())
        with tempfile.TemporaryDirectory(prefix="churn-") as tmp:
            program = Path(tmp) / "churn_words"
            subprocess.run(["gcc", "-O2", "-o", str(program), str(HERE / "churn_words.c")],
                           check=True)
            rows = []
            expected = None
            for label, lib in libs.items():
                count, out = callgrind([str(program), str(args.rounds)], {"PATH": "/usr/bin:/bin"}, lib)
                expected = expected or out
                if out != expected:
                    raise HctuneError(f"{label}: output differs from glibc's")
                fp = mx = ""
                if label.startswith("hc:"):
                    stats = Path(tmp) / "stats"
                    subprocess.run([str(program), str(args.rounds)], check=True,
                                   capture_output=True,
                                   env={"LD_PRELOAD": str(lib), "HCMALLOC_STATS": str(stats)})
                    st = read_stats(stats)
                    fp = f"{st['footprint'] / 2**20:.1f}"
                    mx = f"{st['bytes_max'] / 2**20:.1f}"
                rows.append((label, count, fp, mx))
    except (HctuneError, subprocess.CalledProcessError, OSError) as e:
        print(f"churn_instructions: {e}", file=sys.stderr)
        return 2
    ref = rows[0][1]
    cmd = "bench/churn_instructions.py " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:]))
    print(f"Made by `.venv/bin/python {cmd.strip()}` (callgrind, whole program, "
          f"{args.rounds} rounds).\n")
    print("| allocator | instructions (M) | vs glibc | HC footprint MiB | HC max in use MiB |")
    print("|---|---:|---:|---:|---:|")
    for label, count, fp, mx in rows:
        print(f"| {label} | {count / 1e6:.1f} | {count / ref:.2f} | {fp} | {mx} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
