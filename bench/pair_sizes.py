#!/usr/bin/env python3
"""Instructions per malloc/free pair by request size (callgrind, deterministic): HC generic
against glibc, jemalloc, mimalloc and tcmalloc, one thread.

    .venv/bin/python bench/pair_sizes.py [--sizes 16,256,4096,6000,20000] [--pairs 50000]
                                         [--lib NAME=PATH] [--variant LABEL=KNOB=V[,KNOB=V]]

bench/pair_loop.c keeps 64 blocks live and replaces the oldest per pair (a free, then a malloc
of the same size), so a pair is a real free-list pop and push.  It runs N and 2N pairs under
callgrind; the difference over N is one pair's cost, the loop's own ~17 instructions included
(the same for every allocator).  Up to SMALL_MAX (4 KiB in generic) HC serves the pair from its
small pages; above, from the paper's heap (big list: BIG_AO_FIT's tree).  Prints Markdown with
the command that made it.
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

from alloc_bench import callgrind
from hctune import allocators as system_allocators
from hctune import knobs
from hctune.build import build_hc
from hctune.errors import HctuneError

ROOT = Path(__file__).resolve().parent.parent
ENV = {"PATH": "/usr/bin:/bin"}


def allocators(args) -> dict[str, Path | None]:
    out: dict[str, Path | None] = {"glibc": None, "hc:generic": build_hc(knobs.preset("generic"))}
    for item in args.variant:
        label, _, sets = item.partition("=")
        if not label or not sets:
            raise HctuneError(f"--variant {item!r}: expected LABEL=KNOB=VALUE[,KNOB=VALUE...]")
        out[f"hc:{label}"] = build_hc(knobs.resolve("generic", sets.split(",")))
    for item in args.lib:
        label, _, path = item.partition("=")
        if not label or not Path(path).is_file():
            raise HctuneError(f"--lib {item!r}: expected NAME=PATH of an existing HC .so")
        out[f"hc:{label}"] = Path(path).resolve()
    out.update(system_allocators.installed())
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="16,256,4096,6000,20000")
    ap.add_argument("--pairs", type=int, default=50_000)
    ap.add_argument("--lib", action="append", default=[])
    ap.add_argument("--variant", action="append", default=[])
    args = ap.parse_args(argv)
    try:
        sizes = [int(s) for s in args.sizes.split(",") if s]
        if not sizes or min(sizes) < 1 or args.pairs < 1:
            raise ValueError
    except ValueError:
        print("pair_sizes: --sizes needs positive integers (e.g. 16,4096) and --pairs >= 1",
              file=sys.stderr)
        return 2
    try:
        libs = allocators(args)
        with tempfile.TemporaryDirectory(prefix="pair-") as tmp:
            pair = Path(tmp) / "pair_loop"
            subprocess.run(["gcc", "-O2", "-o", str(pair), str(ROOT / "bench" / "pair_loop.c"),
                            "-lpthread"], check=True, capture_output=True)
            names = list(libs)
            rows = []
            for size in sizes:
                row = []
                for name in names:
                    lo = callgrind([str(pair), str(args.pairs), str(size)], ENV, libs[name])[0]
                    hi = callgrind([str(pair), str(2 * args.pairs), str(size)], ENV, libs[name])[0]
                    row.append(f"{(hi - lo) / args.pairs:.0f}")
                rows.append((size, row))
    except (HctuneError, subprocess.CalledProcessError, OSError) as e:
        print(f"pair_sizes: {e}", file=sys.stderr)
        return 2
    cmd = "bench/pair_sizes.py " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:]))
    print(f"Instructions per malloc/free pair (callgrind), one thread: `.venv/bin/python {cmd.strip()}`\n")
    print("| size (B) | " + " | ".join(names) + " |")
    print("|---" * (len(names) + 1) + "|")
    for size, row in rows:
        print(f"| {size} | " + " | ".join(row) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
