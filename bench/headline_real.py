#!/usr/bin/env python3
"""The headline on real runs: profile each program on one input, search perf and mem, then
`hctune validate` on a *different* input of the same program (interleaved real runs of tuned
HC, generic HC, glibc, jemalloc, mimalloc, tcmalloc, with 95 % intervals).

    .venv/bin/python bench/headline_real.py [--out bench-out/headline-real] [--trials 20]
        [--runs 10] [--top 3] [--scale 1.0] [PROGRAM ...]

PROGRAMs: gawk groff ghostscript python3 sqlite3 perl xz (default: all; xz is the threaded one:
four compressing threads on the machine's cores). --scale shrinks or grows
the generated inputs (0.2 for a quick look). Long at full scale (an hour or more on two busy
cores): a benchmark, never a test. Prints one Markdown table per objective and writes
headline-real.json; every figure comes from the validations stored in <out>/hctune.db.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROGRAMS = ("gawk", "groff", "ghostscript", "python3", "sqlite3", "perl", "xz")

AWK = ('{ for (i = 1; i <= NF; i++) { c[$i]++; last[$i] = $0 } } '
       'NR % 4000 == 0 { for (w in last) delete last[w] } END { print length(c) }')
PERL = ('my (%c, %l); while (<>) { for my $w (split) { $c{$w}++; push @{$l{substr($w,0,2)}}, $w } '
        'if ($. % 3000 == 0) { %l = () } } print scalar(keys %c), "\\n";')
PY_WORK = """
import random, sys
rng = random.Random(int(sys.argv[1]))
n = int(sys.argv[2])
keep = []
for r in range(8):
    d = {f"k{i}-{r}-{rng.random()}": [i] * (i % 7) for i in range(n)}
    s = {(i, str(i)) for i in range(0, n + n // 2, 3)}
    keep.append([d[k] for k in list(d)[::400]])
    if len(keep) > 5:
        keep.pop(rng.randrange(len(keep)))
    del d, s
print(sum(len(x) for x in keep))
"""


def make_inputs(out: Path, tag: str, seed: int, scale: float):
    rng = random.Random(seed)
    words = ["".join(rng.choice("etaoinshrdlucmfwypvbgkq") for _ in range(rng.randint(2, 11)))
             for _ in range(8000)]
    lines = int(30000 * scale)
    with open(out / f"text-{tag}.txt", "w") as f:
        for _ in range(lines):
            f.write(" ".join(rng.choice(words) for _ in range(rng.randint(3, 14))) + "\n")
    with open(out / f"doc-{tag}.ms", "w") as f:
        for s in range(max(4, int(120 * scale))):
            f.write(f".NH\nSection {s}\n.PP\n")
            for _ in range(25):
                f.write(" ".join(rng.choice(words) for _ in range(rng.randint(8, 30))) + ".\n")
            f.write(".IP \\(bu\n" + " ".join(rng.choice(words) for _ in range(20)) + "\n")
    with open(out / f"work-{tag}.sql", "w") as f:
        f.write("CREATE TABLE t(a INTEGER, b TEXT);\nBEGIN;\n")
        for _ in range(int(40000 * scale)):
            f.write(f"INSERT INTO t VALUES({rng.randrange(10**6)}, "
                    f"'{rng.choice(words) * rng.randint(1, 6)}');\n")
        f.write("COMMIT;\nCREATE INDEX ti ON t(b);\n"
                "SELECT b, COUNT(*), SUM(a) FROM t GROUP BY b ORDER BY 2 DESC LIMIT 5;\n"
                "DELETE FROM t WHERE a % 3 = 0;\nSELECT COUNT(*) FROM t;\n")
    (out / "work.py").write_text(PY_WORK)
    with open(out / f"doc-{tag}.ps", "wb") as f:
        subprocess.run(["groff", "-Tps", "-ms", str(out / f"doc-{tag}.ms")], stdout=f,
                       check=True)


def command(name: str, out: Path, tag: str, seed: int, scale: float) -> tuple[list[str], dict]:
    """(argv, extra environment) of `name` on input `tag`."""
    py = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else shutil.which("python3")
    return {
        "gawk": (["gawk", AWK, str(out / f"text-{tag}.txt")], {}),
        "groff": (["troff", "-Tps", "-ms", str(out / f"doc-{tag}.ms")], {}),
        "ghostscript": (["gs", "-q", "-dNOPAUSE", "-dBATCH", "-dSAFER", "-sDEVICE=bbox",
                         str(out / f"doc-{tag}.ps")], {}),
        # every object from malloc: pymalloc would serve small objects from its own arenas
        "python3": ([py, str(out / "work.py"), str(seed), str(int(20000 * scale))],
                    {"PYTHONMALLOC": "malloc"}),
        "sqlite3": (["sqlite3", ":memory:", "-init", str(out / f"work-{tag}.sql"), ".quit"], {}),
        "perl": (["perl", "-e", PERL, str(out / f"text-{tag}.txt")], {}),
        # multi-threaded: 256 KiB blocks, so the four threads each get work from a small input
        "xz": (["xz", "-T4", "--block-size=262144", "-6", "-c", str(out / f"text-{tag}.txt")],
               {}),
    }[name]


def hctune(db: Path, *args, env=None, capture=False):
    cmd = [sys.executable, "-m", "hctune", "--db", str(db), *map(str, args)]
    print("$ hctune " + shlex.join(map(str, args)), file=sys.stderr, flush=True)
    r = subprocess.run(cmd, env={**os.environ, **(env or {})}, text=True,
                       stdout=subprocess.PIPE if capture else subprocess.DEVNULL)
    if r.returncode != 0:
        raise SystemExit(f"headline_real: hctune {args[0]} failed ({r.returncode})")
    return r.stdout


def cell(c, key, m):
    r = (c or {}).get(key, {}).get(m)
    if not r:
        return "-"
    star = "*" if r["ci"][1] < 1 or r["ci"][0] > 1 else ""
    return f"{r['ratio']:.2f}{star} ({r['ci'][0]:.2f}–{r['ci'][1]:.2f})"


def table(results: dict, objective: str) -> str:
    m = "peak_rss_bytes" if objective == "mem" else "wall_s"
    what = "peak RSS" if objective == "mem" else "wall time"
    refs = ("glibc", "jemalloc", "mimalloc", "tcmalloc")
    head = (f"| program | winner | {what} / generic | " + " | ".join(f"{what} / {r}" for r in refs)
            + (" | replay footprint / glibc" if objective == "mem" else " | replay time / glibc")
            + " | verdict |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for name, v in results.items():
        s = v.get(objective)
        if not s:
            continue
        by = {c["candidate"]: c for c in s["candidates"]}
        w = by.get((s.get("winner") or {}).get("candidate"))
        cells = []
        for r in refs:
            if r == "glibc":
                cells.append(cell(w, "vs_glibc", m))
                continue
            ref = by.get(r)
            if not w or not ref or ref["disqualified"] or not ref["median"][m]:
                cells.append("-")
            else:
                cells.append(f"{w['median'][m] / ref['median'][m]:.2f}")
        pred = (w or {}).get("replay") or {}   # mem: the replay's footprint ratio
        p = pred.get("mem_ratio" if objective == "mem" else "perf_ratio")
        lines.append(f"| {name} | {w['candidate'] if w else '-'} | {cell(w, 'vs_generic', m)} | "
                     + " | ".join(cells) + f" | {'-' if p is None else f'{p:.2f}'} | "
                     f"{s['verdict']} |")
    return "\n".join(lines)


def agreement(results: dict) -> str:
    """How often the replay ranks a pair as the real runs do, over the pairs (HC candidate vs
    generic HC, HC candidate or generic vs glibc) whose real ratio is significant (its 95 %
    interval excludes 1): the replay's ratio of the two must lie on the same side of 1."""
    agree = total = pairs = 0
    for v in results.values():
        for objective, s in v.items():
            m, rk = ("peak_rss_bytes", "mem_ratio") if objective == "mem" else ("wall_s",
                                                                                "perf_ratio")
            by = {c["candidate"]: c for c in s["candidates"]}
            for c in s["candidates"]:
                if c["kind"] not in ("tuned", "generic") or c["disqualified"] or not c["replay"]:
                    continue
                for key, other in (("vs_generic", "hc generic"), ("vs_glibc", "glibc")):
                    r, o = c[key].get(m), by.get(other)
                    if not r or not o or not o.get("replay"):
                        continue
                    pairs += 1
                    if r["ci"][1] < 1 or r["ci"][0] > 1:
                        total += 1
                        predicted = c["replay"][rk] / o["replay"][rk]
                        agree += (predicted < 1) == (r["ratio"] < 1)
    return (f"replay and real runs rank {agree} of {total} pairs alike where the real difference "
            f"is significant ({pairs} pairs in all; a pair is an HC candidate vs generic HC or vs "
            "glibc)")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="bench-out/headline-real")
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--top", type=int, default=3)
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--tables-only", action="store_true",
                    help="print the tables from <out>/headline-real.json, run nothing")
    ap.add_argument("programs", nargs="*", default=list(PROGRAMS))
    a = ap.parse_args(argv)
    out = Path(a.out).resolve()
    if a.tables_only:
        results = json.loads((out / "headline-real.json").read_text())
        for objective in ("perf", "mem"):
            print(f"\n## {objective}\n\n{table(results, objective)}")
        print("\n" + agreement(results))
        return 0
    out.mkdir(parents=True, exist_ok=True)
    db = out / "hctune.db"
    make_inputs(out, "a", 2006, a.scale)     # profiled and searched
    make_inputs(out, "b", 2007, a.scale)     # validated: an input the search never saw
    # programs run before in this directory keep their results (run one more: name it alone)
    done = out / "headline-real.json"
    results = json.loads(done.read_text()) if done.exists() else {}
    for name in a.programs:
        argv_a, env = command(name, out, "a", 2006, a.scale)
        argv_b, _ = command(name, out, "b", 2007, a.scale)
        trace = out / f"{name}.hct"
        if not trace.exists():
            hctune(db, "profile", "-o", trace, *argv_a, env=env)
        results[name] = {}
        for objective in ("perf", "mem"):
            study = f"real-{name}-{objective}"
            hctune(db, "search", trace, "--objective", objective, "--trials", a.trials,
                   "--seed", 1, "--study", study, "--allocators", "hc")
            s = hctune(db, "validate", "--study", study, "--runs", a.runs, "--top", a.top,
                       "--json", "--", *argv_b, env=env, capture=True)
            results[name][objective] = json.loads(s)
    (out / "headline-real.json").write_text(json.dumps(results, indent=1, sort_keys=True))
    print(f"# .venv/bin/python bench/headline_real.py --out {a.out} --trials {a.trials} "
          f"--runs {a.runs} --top {a.top} --scale {a.scale} {' '.join(a.programs)}")
    for objective in ("perf", "mem"):
        print(f"\n## {objective}: the validated winner on input b (searched on input a); "
              "ratios with 95 % CI, * = significant\n")
        print(table(results, objective))
    print("\n" + agreement(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
