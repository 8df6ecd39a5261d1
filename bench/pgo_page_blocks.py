"""A page size per class (SMALL_PAGE_BLOCKS, docs/profile-guided.md) on small heaps: the six
programs of the registered benchmark (bench/pgo_bench.py) on inputs a hundredth of input a's,
peak RSS under glibc, generic HC, and generic HC with SMALL_PAGE_BLOCKS at each value given.
Interleaved rounds (the order rotated each round), medians and min-max.

    PYTHONPATH=tuner .venv/bin/python bench/pgo_page_blocks.py [--rounds 5] [--blocks 8,32]
        [--scale 0.01] [--only lua,jq] [--work DIR]

Prints a Markdown table and the command that reproduces it.  2 cores; run with nothing else
heavy (figures of a few MiB move by a few hundred KiB with the page cache's sharing).
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pgo_bench as pb                            # noqa: E402
from pgo_bench import knobs                        # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--blocks", default="8,32")
    ap.add_argument("--scale", type=float, default=0.01)
    ap.add_argument("--only", default="lua,jq,python3,gawk,sqlite3,perl")
    ap.add_argument("--work", default="/tmp/pgo-page-blocks")
    args = ap.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    for name, (a, b) in list(pb.SIZES.items()):
        pb.SIZES[name] = (max(1, int(a * args.scale)), max(1, int(b * args.scale)))
    generic = dict(knobs.preset("generic"))
    cands = {"glibc": None, "hc-generic": pb.build(generic, work / "libhc-generic.so")}
    for n in (int(x) for x in args.blocks.split(",") if x):
        cands[f"hc-pb{n}"] = pb.build(dict(generic, SMALL_PAGE_BLOCKS=n), work / f"libhc-pb{n}.so")
    print("| program (input a x %g) | " % args.scale + " | ".join(cands) + " |")
    print("|---" * (len(cands) + 1) + "|")
    for name in args.only.split(","):
        env = {"GCMODE": "incremental"} if name == "lua" else None
        argv = pb.make_inputs(work, name, "a")
        meas = {c: [] for c in cands}
        md5 = {}
        for r in range(args.rounds):
            order = list(cands)[r % len(cands):] + list(cands)[:r % len(cands)]
            for c in order:
                rss, _cpu, out = pb.run(argv, cands[c], env)
                meas[c].append(rss / 1024)
                md5.setdefault(out, []).append(c)
        cells = [f"{statistics.median(v):.2f} ({min(v):.2f}-{max(v):.2f})" for v in meas.values()]
        flag = "" if len(md5) == 1 else " (outputs differ!)"
        print(f"| {name}{flag} | " + " | ".join(cells) + " |", flush=True)
    print(f"\n{args.rounds} interleaved rounds; peak RSS MiB, median (min-max); 2 cores.")
    print("reproduce: PYTHONPATH=tuner .venv/bin/python bench/pgo_page_blocks.py "
          f"--rounds {args.rounds} --blocks {args.blocks} --scale {args.scale} --only {args.only}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
