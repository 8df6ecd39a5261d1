"""python3 building and dropping phases of dicts of lists of tuples (bench/pgo_bench.py).
usage: python3 pgo_phases.py ITEMS SEED"""
import random
import sys

n, seed = int(sys.argv[1]), int(sys.argv[2])
rng = random.Random(seed)
keep, total = [], 0
for phase in range(6):
    d = {}
    for i in range(n):
        k = f"k{rng.randrange(n // 4)}-{phase}"
        d.setdefault(k, []).append((i, str(i * 7), rng.random()))
    keep.append(d)
    if len(keep) > 2:
        keep.pop(0)
    total += sum(len(v) for v in d.values()) + len(d)
print(phase, total)
