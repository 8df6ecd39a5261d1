"""Issue 36's pre-registered benchmark (docs/lab/pgo-registration.md): eight Debian programs, each
profiled on input a, its fitted class table derived from that trace (hctune.trace.fitted), and
measured on input b against glibc, jemalloc, mimalloc, tcmalloc and generic HC: peak RSS, CPU
time, peak live bytes of b, the program's non-heap RSS.  3 interleaved rounds, medians, min-max.

    PYTHONPATH=tuner .venv/bin/python bench/pgo_bench.py [--rounds 3] [--only lua,jq] [--work DIR]
        [--page-blocks N]

--page-blocks N adds a candidate reported beside the answer, not instead of it: the fitted
setting with SMALL_PAGE_BLOCKS=N (a page size per class; registered for cc1 and xmllint).

Prints a Markdown table and writes DIR/results.json.  2 cores; run with nothing else heavy.
The XML processor is xmllint (Debian's libxml2-utils; as root: apt-get install -y libxml2-utils);
the compiler is gcc 12's cc1, profiled and run directly (not through the gcc driver).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tuner"))
from hctune.render import render_malloc          # noqa: E402
from hctune import knobs                          # noqa: E402
from hctune.trace import fitted                   # noqa: E402

LIBDIR = Path("/usr/lib/x86_64-linux-gnu")
OTHERS = {"jemalloc": LIBDIR / "libjemalloc.so.2", "mimalloc": LIBDIR / "libmimalloc.so.2",
          "tcmalloc": LIBDIR / "libtcmalloc_minimal.so.4"}
SIZES = {"lua": (50_000, 70_000), "jq": (60_000, 90_000), "python3": (200_000, 300_000),
         "gawk": (300_000, 450_000), "sqlite3": (60_000, 90_000), "perl": (200_000, 300_000),
         "cc1": (150, 225), "xmllint": (100_000, 150_000)}
CC1 = "/usr/lib/gcc/x86_64-linux-gnu/12/cc1"
XPATH = "sum(//rec[@kind='buy']/price)"
PERL = r'''my ($n, $seed) = @ARGV; srand($seed); my (@keep, $total);
for my $phase (1..5) { my %h; for my $i (1..$n) { my $k = "k" . int(rand($n / 4));
  push @{$h{$k}}, "v$i-" . ("x" x int(rand(60))); }
  my @s = sort { scalar(@{$h{$b}}) <=> scalar(@{$h{$a}}) || $a cmp $b } keys %h;
  $total += scalar(@s); push @keep, \%h; shift @keep if @keep > 2; }
print "$total\n";'''
GAWK = ('{for(i=1;i<=NF;i++){c[$i]++; l[$i]=l[$i] " " NR}} '
        'END{n=0; m=0; for(w in c){n+=c[w]; m+=length(l[w])}; print n, length(c), m}')


def c_source(n: int, rng: random.Random) -> str:
    """A C translation unit of n functions (loops, switches, calls to earlier functions, list
    walks, string literals, constant tables), no #include: cc1 -O2's input."""
    out = ["typedef unsigned long u64;",
           "struct node { struct node *next; u64 key; int kind; double w; char name[24]; };",
           "struct table { int n; struct node *slot[64]; u64 hist[16]; };",
           "extern int sink(const char *, ...);"]
    ops = ["+", "-", "*", "^", "|", "&"]
    for i in range(n):
        k = rng.randrange(4)
        init = " = {0}" if k == 0 else ""
        body = [f"u64 f{i}(struct table *t, u64 x, int y) {{", "    u64 acc = x;",
                f"    int v[{rng.randrange(4, 40)}]{init};", "    struct node *p;"]
        for j in range(rng.randrange(3, 12)):
            r = rng.random()
            if r < 0.25:
                body.append(f"    for (int i{j} = 0; i{j} < y % {rng.randrange(3, 50)}; i{j}++) {{ "
                            f"v[i{j} % 4] = (int)(acc {rng.choice(ops)} {rng.randrange(1, 1000)}u); "
                            f"acc += v[i{j} % 4]; }}")
            elif r < 0.45:
                cases = " ".join(f"case {c}: acc {rng.choice(ops)}= {rng.randrange(1, 99999)}u; break;"
                                 for c in range(rng.randrange(2, 12)))
                body.append(f"    switch ((int)(acc % {rng.randrange(3, 20)})) {{ {cases} "
                            "default: acc++; }")
            elif r < 0.6 and i:
                body.append(f"    acc += f{rng.randrange(i)}(t, acc {rng.choice(ops)} "
                            f"{rng.randrange(1, 77)}u, y - 1);")
            elif r < 0.75:
                body.append("    for (p = t->slot[acc % 64]; p; p = p->next) if (p->key == acc) "
                            f"{{ p->w *= {rng.random():.3f}; acc ^= (u64)p->kind; }}")
            elif r < 0.9:
                body.append(f"    if (acc % {rng.randrange(2, 9)} == {rng.randrange(2)}) "
                            f"sink(\"f{i} %lu {'x' * rng.randrange(0, 40)}\", acc);")
            else:
                body.append(f"    t->hist[acc % 16] += (u64)y * {rng.randrange(1, 9)}u; "
                            f"acc = (acc << {rng.randrange(1, 9)}) | (acc >> {rng.randrange(1, 9)});")
        body += ["    return acc;" if k else "    return acc + (u64)v[0];", "}"]
        out += body
        if i % 25 == 0:
            vals = ", ".join(str(rng.randrange(1 << 30)) for _ in range(rng.randrange(8, 64)))
            out.append(f"static const u64 tab{i}[] = {{ {vals} }};")
            out.append(f"u64 g{i}(int j) {{ return tab{i}[j % (int)(sizeof tab{i} / "
                       f"sizeof tab{i}[0])]; }}")
    return "\n".join(out) + "\n"


def make_inputs(work: Path, name: str, which: str) -> list[str]:
    """The argv of program `name` on input a or b (files generated once, from fixed seeds)."""
    n, seed = SIZES[name][0 if which == "a" else 1], 1 if which == "a" else 2
    if name == "lua":
        return ["lua5.4", str(ROOT / "bench/pgo_generations.lua"), str(n), "8", str(seed)]
    if name == "python3":
        # Debian's interpreter itself (a pyenv shim on PATH would be a shell script)
        return ["/usr/bin/python3", str(ROOT / "bench/pgo_phases.py"), str(n), str(seed)]
    if name == "perl":
        return ["perl", "-e", PERL, str(n), str(seed)]
    f = work / f"{name}_{which}.in"
    if not f.exists():
        rng = random.Random(seed)
        with open(f, "w") as out:
            if name == "jq":
                for i in range(n):
                    out.write(json.dumps({"id": i, "user": f"u{rng.randrange(5000)}",
                                          "kind": rng.choice(["view", "click", "buy", "share"]),
                                          "price": round(rng.random() * 100, 2),
                                          "tags": [f"t{rng.randrange(300)}"
                                                   for _ in range(rng.randrange(1, 8))],
                                          "text": "x" * rng.randrange(0, 200)}) + "\n")
            elif name == "gawk":
                words = [f"w{i}" * (1 + i % 3) for i in range(20000)]
                for _ in range(n):
                    out.write(" ".join(rng.choice(words) for _ in range(rng.randrange(3, 12)))
                              + "\n")
            elif name == "cc1":
                out.write(c_source(n, rng))
            elif name == "xmllint":
                out.write('<?xml version="1.0"?>\n<log>\n')
                for i in range(n):
                    tags = "".join(f"<t>t{rng.randrange(300)}</t>"
                                   for _ in range(rng.randrange(1, 8)))
                    out.write(f'<rec id="{i}" kind="{rng.choice(["view", "click", "buy", "share"])}"'
                              f' user="u{rng.randrange(5000)}"><price>{rng.random() * 100:.2f}'
                              f'</price><tags>{tags}</tags><text>{"x" * rng.randrange(0, 200)}'
                              '</text></rec>\n')
                out.write("</log>\n")
            elif name == "sqlite3":
                out.write(f"""CREATE TABLE t(id INTEGER PRIMARY KEY, s TEXT, g INT);
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x<{n})
INSERT INTO t SELECT x, printf('%.*c', 300 + (x*7919+{seed})%900, 'x'), x%97 FROM c;
CREATE INDEX ti ON t(s);
SELECT g, count(*), sum(length(s)) FROM t GROUP BY g ORDER BY g LIMIT 5;
DELETE FROM t WHERE id % 2 = 0;
SELECT count(*), sum(length(s)) FROM t;
""")
    if name == "jq":
        return ["jq", "-n", "-c", "-f", str(ROOT / "bench/pgo_jq_filter.jq"), str(f)]
    if name == "gawk":
        return ["gawk", GAWK, str(f)]
    if name == "cc1":   # the assembly to stdout (compared with glibc's run's)
        return [CC1, "-quiet", "-O2", str(f), "-o", "/dev/stdout"]
    if name == "xmllint":
        return ["xmllint", "--xpath", XPATH, str(f)]
    return ["sqlite3", ":memory:", f".read {f}"]


def run(argv, lib, env=None):
    """(max RSS KiB, user+sys s, md5 of stdout) of argv under lib (None: glibc)."""
    e = dict(os.environ, **(env or {}))
    e.pop("LD_PRELOAD", None)
    pre = ["env", f"LD_PRELOAD={lib}"] if lib else []
    r = subprocess.run(["nice", "-n", "10", "/usr/bin/time", "-f", "@@ %M %U %S", *pre, *argv],
                       capture_output=True, env=e)
    tail = [ln for ln in r.stderr.decode(errors="replace").splitlines() if ln.startswith("@@ ")]
    if r.returncode != 0 or not tail:
        raise SystemExit(f"{argv[0]} under {lib or 'glibc'} failed: {r.stderr[-400:]!r}")
    _, rss, u, s = tail[-1].split()
    return int(rss), float(u) + float(s), hashlib.md5(r.stdout).hexdigest()


def hctune(*args, env=None):
    e = dict(os.environ, PYTHONPATH=str(ROOT / "tuner"), **(env or {}))
    return subprocess.run([sys.executable, "-m", "hctune", *args], capture_output=True, env=e,
                          check=True)


def build(setting: dict, out: Path) -> Path:
    src = out.with_suffix(".c")
    src.write_text(render_malloc(knobs.complete(setting)))
    subprocess.run(["cc", "-O2", "-fPIC", "-shared", "-pthread", "-std=gnu11", "-Wall", "-Wextra",
                    "-Werror", "-o", str(out), str(src)], check=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", default=",".join(SIZES))
    ap.add_argument("--work", default="/tmp/pgo-bench")
    ap.add_argument("--page-blocks", type=int, default=0)
    args = ap.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    db = work / "bench.db"
    generic = build(dict(knobs.preset("generic")), work / "libhc-generic.so")
    results = {}
    for name in args.only.split(","):
        done = work / f"{name}.json"      # a program measured before (the run was cut) stands
        if done.exists():
            results[name] = json.loads(done.read_text())
            print(f"{name}: measured before ({done})", flush=True)
            continue
        env = {"GCMODE": "incremental"} if name == "lua" else None
        ta, tb = work / f"{name}_a.hct", work / f"{name}_b.hct"
        for which, t in (("a", ta), ("b", tb)):
            if not t.exists():
                hctune("--db", str(db), "profile", "-o", str(t), *make_inputs(work, name, which),
                       env=env)
        fit = fitted.derive(fitted.profile([ta]), 0, fitted.FIT_MAX, grain=8)
        setting = dict(knobs.preset("generic"), FIT_ALIGN8=1, **fit.knobs())
        lib = build(setting, work / f"libhc-fit-{name}.so")
        live_b = fitted.profile([tb]).max_live_bytes
        argv = make_inputs(work, name, "b")
        cands = {"glibc": None, **OTHERS, "hc-generic": generic, "hc-fitted": lib}
        if args.page_blocks:
            pbn = f"hc-fitted-pb{args.page_blocks}"
            cands[pbn] = build(dict(setting, SMALL_PAGE_BLOCKS=args.page_blocks),
                               work / f"libhc-fit-{name}-pb{args.page_blocks}.so")
        meas = {c: [] for c in cands}
        ref = None
        for r in range(args.rounds):
            order = list(cands)[r % len(cands):] + list(cands)[:r % len(cands)]
            for c in order:
                rss, cpu, md5 = run(argv, cands[c], env)
                if c == "glibc":
                    ref = ref or md5
                meas[c].append({"rss_kib": rss, "cpu_s": cpu, "md5": md5})
        bad = [c for c in cands if any(m["md5"] != ref for m in meas[c])]
        results[name] = {"table": fit.table, "note": fit.note, "live_b": live_b,
                         "argv_b": argv, "runs": meas, "output_differs": bad}
        done.write_text(json.dumps(results[name], indent=1))
        print(f"{name}: table {fit.table}; {fit.note}", flush=True)
    (work / "results.json").write_text(json.dumps(results, indent=1))
    cols = []
    for r in results.values():
        cols += [c for c in r["runs"] if c not in cols]
    print("\n| program | peak live b MiB | " + " | ".join(cols) + " | fitted/smallest | "
          "fitted/live | CPU fitted/fastest |")
    print("|---" * (len(cols) + 5) + "|")
    for name, r in results.items():
        med = {c: statistics.median(m["rss_kib"] for m in v) / 1024 for c, v in r["runs"].items()}
        spread = {c: (min(m["rss_kib"] for m in v) / 1024, max(m["rss_kib"] for m in v) / 1024)
                  for c, v in r["runs"].items()}
        cpu = {c: statistics.median(m["cpu_s"] for m in v) for c, v in r["runs"].items()}
        asis = min(v for c, v in med.items() if not c.startswith("hc-fitted"))
        fastest = min(v for c, v in cpu.items())
        cells = [f"{med[c]:.1f} ({spread[c][0]:.1f}-{spread[c][1]:.1f})" if c in med else "-"
                 for c in cols]
        print(f"| {name} | {r['live_b'] / 1048576:.1f} | " + " | ".join(cells)
              + f" | {med['hc-fitted'] / asis:.3f} | {med['hc-fitted'] * 1048576 / r['live_b']:.2f}"
              f" | {cpu['hc-fitted'] / fastest:.2f} |")
    print(f"\n{args.rounds} rounds; medians of peak RSS in MiB (min-max); outputs differing from "
          f"glibc's: {[n for n, r in results.items() if r['output_differs']] or 'none'}")
    print("reproduce: PYTHONPATH=tuner .venv/bin/python bench/pgo_bench.py "
          f"--rounds {args.rounds} --only {args.only}"
          + (f" --page-blocks {args.page_blocks}" if args.page_blocks else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
