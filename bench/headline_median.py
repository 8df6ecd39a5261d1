"""Median, cell by cell, of several runs of bench/headline.sh (each its own OUT folder).

The machines are shared and noisy, so the README quotes the median of three runs:

    for k in 1 2 3; do OUT=bench-out/headline-$k bash bench/headline.sh; done
    .venv/bin/python bench/headline_median.py bench-out/headline-*/headline.txt
"""

import statistics
import sys


def read(path):
    rows, header = {}, None
    for line in open(path):
        cells = line.split()
        if not cells or line.startswith(("#", "-")):
            continue
        if cells[0] == "program":
            header = cells[1:]
            continue
        rows[cells[0]] = [float(c) for c in cells[1:]]
    if header is None:
        sys.exit(f"headline_median: {path} has no table")
    return header, rows


def main(paths):
    if not paths:
        sys.exit(__doc__)
    tables = [read(p) for p in paths]
    header = tables[0][0]
    programs = list(tables[0][1])
    print(f"median of {len(paths)} runs of bench/headline.sh; ratios < 1 favour tuned HC")
    print("| program | " + " | ".join(header) + " |")
    print("|---" * (len(header) + 1) + "|")
    for prog in programs:
        cols = zip(*(t[1][prog] for t in tables if prog in t[1]))
        print(f"| {prog} | " + " | ".join(f"{statistics.median(c):.3f}" for c in cols) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
