"""Allocation-heavy real programs for bench/alloc_bench.py, with their generated inputs.

Each workload is a real program run on an input made here, deterministically (fixed seeds), so
every allocator sees exactly the same work: python3 building and dropping containers, cc1 (the
C compiler proper) at -O2 on a large generated C file, sqlite3 running a script, gawk and perl
counting words, xz compressing with four threads, and the small-object C programs of issue 17
(bench/churn_words.c, bench/wordtable.c, bench/wordpool.c). Each takes about a second or two
under glibc on one core.
"""

from __future__ import annotations

import dataclasses
import random
import shutil
import subprocess
import sys
from pathlib import Path


@dataclasses.dataclass
class Workload:
    name: str
    argv: list[str]
    env: dict
    what: str


PYTHON_SCRIPT = r"""
import random
rng = random.Random(2006)
keep = []
for round_ in range(40):
    d = {f"k{i}-{round_}": [i] * (i % 7) for i in range(20000)}
    s = {(i, str(i)) for i in range(0, 30000, 3)}
    words = [("w" * (i % 40)) + str(i) for i in range(20000)]
    text = " ".join(words).split(" ")
    keep.append([d[k] for k in list(d)[::500]])
    if len(keep) > 5:
        keep.pop(rng.randrange(len(keep)))
    del d, s, words, text
print(sum(len(x) for x in keep))
"""


def _c_source(functions: int) -> str:
    rng = random.Random(1995)
    out = ["typedef unsigned long u64;", "struct node { u64 v; struct node *next; };"]
    for f in range(functions):
        body = []
        for k in range(rng.randint(8, 24)):
            a, b = rng.randint(1, 9999), rng.randint(1, 63)
            body.append(f"  case {k}: x = (x * {a}u) ^ (x >> {b % 31 + 1}); "
                        f"if (x & {1 << (b % 16)}u) x += f{max(f - 1, 0)}(x, n - 1); break;")
        out.append(f"u64 f{f}(u64 x, int n);")
        out.append(f"u64 f{f}(u64 x, int n) {{ if (n <= 0) return x; "
                   f"for (int i = 0; i < n; i++) switch ((x + i) % {len(body)}) {{\n"
                   + "\n".join(body) + "\n  }\n  return x; }")
    return "\n".join(out) + "\n"


def _sqlite_script(rows: int) -> str:
    return f"""
CREATE TABLE item(id INTEGER PRIMARY KEY, name TEXT, grp INTEGER, payload BLOB);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {rows})
INSERT INTO item SELECT i, 'name-' || (i * 7919 % 30011), i % 97, zeroblob(i % 1500) FROM n;
CREATE INDEX item_name ON item(name);
SELECT grp, count(*), sum(length(payload)) FROM item GROUP BY grp ORDER BY grp LIMIT 5;
DELETE FROM item WHERE id % 3 = 0;
UPDATE item SET payload = zeroblob(length(payload) * 2 % 4000) WHERE grp < 40;
SELECT count(*), length(group_concat(name)) FROM item;
CREATE TABLE pairs AS SELECT a.id AS x, b.name AS y FROM item a JOIN item b ON a.grp = b.grp
  WHERE a.id % 50 = 0 AND b.id % 7 = 0;
SELECT count(*), count(DISTINCT y) FROM pairs;
"""


GAWK_PROGRAM = r"""
{ for (i = 1; i <= NF; i++) { count[$i]++; line[NR % 5000] = line[NR % 5000] " " $i } }
END { n = asorti(count, keys); for (k in line) total += length(line[k]); print n, total }
"""


# perl's hashes and arrays: a count per word, and lists of words by their first two letters,
# dropped every 3000 lines (bench/headline_real.py's perl program)
PERL_PROGRAM = ('my (%c, %l); while (<>) { for my $w (split) { $c{$w}++; '
                'push @{$l{substr($w,0,2)}}, $w } if ($. % 3000 == 0) { %l = () } } '
                'print scalar(keys %c), "\\n";')


# The issue-9 workload: plain python3 (pymalloc on, so only blocks over 512 bytes reach malloc)
# building and dropping strings, bytes objects and dicts of 8 B .. 1 MiB.
PYTHON_CHURN = r"""
import random
rng = random.Random(9)
keep = []
for r in range(300):
    objs = []
    for i in range(400):
        n = int(2 ** rng.uniform(3, 20))
        k = i % 3
        objs.append("x" * n if k == 0 else bytes(n) if k == 1 else {j: j for j in range(n // 64)})
    keep.append(objs[rng.randrange(len(objs))])
    if len(keep) > 50:
        keep.pop(rng.randrange(len(keep)))
print(len(keep))
"""


def python_churn(rounds: int = 300) -> str:
    """The python-pymalloc workload's script (tests/test_allocator_os.py runs a shorter one)."""
    return PYTHON_CHURN.replace("range(300)", f"range({rounds})", 1)


def _words(path: Path, lines: int) -> None:
    rng = random.Random(20060101)
    vocab = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(1, 14)))
             for _ in range(50000)]
    with open(path, "w") as f:
        for _ in range(lines):
            f.write(" ".join(rng.choice(vocab) for _ in range(rng.randint(1, 20))) + "\n")


def make(workdir: Path, only: list[str] | None = None) -> list[Workload]:
    """The workloads whose programs exist here, inputs written into `workdir`."""
    workdir.mkdir(parents=True, exist_ok=True)
    found = []

    def words():
        if not (workdir / "words.txt").exists():
            _words(workdir / "words.txt", 100_000)

    python = sys.executable  # the interpreter running the bench: a real binary, not a shim
    (workdir / "containers.py").write_text(PYTHON_SCRIPT)
    # PYTHONMALLOC=malloc: every object through malloc, not Python's own small-object pool.
    found.append(Workload("python", [python, str(workdir / "containers.py")],
                          {"PYTHONMALLOC": "malloc"}, "python3: build and drop containers"))
    (workdir / "churn.py").write_text(PYTHON_CHURN)
    found.append(Workload("python-pymalloc", [python, str(workdir / "churn.py")],
                          {"PYTHONHASHSEED": "0"},
                          "python3 (pymalloc on): strings, bytes, dicts of 8 B .. 1 MiB"))
    gcc = shutil.which("gcc")
    if gcc:
        def built(name: str) -> str | None:
            """bench/NAME.c compiled into workdir; None if it does not compile here."""
            out = workdir / name
            src = Path(__file__).resolve().parent / f"{name}.c"
            ok = subprocess.run([gcc, "-O2", "-o", str(out), str(src)],
                                capture_output=True).returncode == 0
            return str(out) if ok else None

        if large := built("large_blocks"):
            found.append(Workload("large", [large, "40000"], {},
                                  "large_blocks.c: 64 live blocks of 64 KiB .. 4 MiB replaced 40,000 times"))
        if churn := built("churn_words"):
            found.append(Workload("churn", [churn, "400000"], {},
                                  "churn_words.c: a word table of 16-32-byte nodes beside 500 "
                                  "buffers of 1-64 KiB replaced or reallocated, 400,000 rounds"))
        if table := built("wordtable"):
            found.append(Workload("wordtable", [table, "400000", "1"], {},
                                  "wordtable.c: a hash table of 24-byte nodes and 4-13-byte "
                                  "words beside 500 buffers of 1-64 KiB, 400,000 rounds"))
        if pool := built("wordpool"):
            words()
            found.append(Workload("wordpool", [pool, str(workdir / "words.txt")], {},
                                  "wordpool.c: every distinct word strdup'd in a thinned hash "
                                  "table beside 20,000 buffers of 32 B-4 KiB, 100k lines"))
            if only and "wordpool-long" in only:  # asked by name only: its input is 22 MB
                if not (workdir / "words-long.txt").exists():
                    _words(workdir / "words-long.txt", 400_000)
                found.append(Workload("wordpool-long", [pool, str(workdir / "words-long.txt")], {},
                                      "wordpool.c on 400k lines: the pool's random frees over "
                                      "~700 pages for about a second"))
        cc1 = subprocess.run([gcc, "-print-prog-name=cc1"], capture_output=True,
                             text=True).stdout.strip()
        if cc1 and Path(cc1).exists():
            (workdir / "big.c").write_text(_c_source(90))
            found.append(Workload("cc1", [cc1, "-quiet", "-O2", str(workdir / "big.c"), "-o",
                                          "/dev/null"], {}, "gcc's cc1 -O2 on a generated 90-function file"))
    sqlite3 = shutil.which("sqlite3")
    if sqlite3:
        (workdir / "script.sql").write_text(_sqlite_script(200_000))
        found.append(Workload("sqlite3", [sqlite3, ":memory:", f".read {workdir / 'script.sql'}"],
                              {}, "sqlite3: 200k-row script, index, delete, update, join"))
    gawk = shutil.which("gawk")
    if gawk:
        words()
        found.append(Workload("gawk", [gawk, GAWK_PROGRAM, str(workdir / "words.txt")], {},
                              "gawk: word counts and string building on 100k lines"))
    perl = shutil.which("perl")
    if perl:
        words()
        found.append(Workload("perl", [perl, "-e", PERL_PROGRAM, str(workdir / "words.txt")], {},
                              "perl: word counts and lists of words by prefix on 100k lines"))
    xz = shutil.which("xz")
    if xz:
        words()
        # threaded; 256 KiB blocks so that four threads each get work from a small input
        found.append(Workload("xz", [xz, "-T4", "--block-size=262144", "-6", "-c",
                                     str(workdir / "words.txt")], {},
                              "xz -T4 -6: four threads compressing 256 KiB blocks"))
        # the same on the first MiB: one block per thread, whose match-finder tables (17 MB
        # each, zeroed by calloc) are written only in part (CALLOC_POPULATE's RSS cost)
        small = workdir / "words-1m.txt"
        if not small.exists():
            with open(workdir / "words.txt", "rb") as src:
                small.write_bytes(src.read(1 << 20))
        found.append(Workload("xz-small", [xz, "-T4", "--block-size=262144", "-6", "-c",
                                           str(small)], {},
                              "xz -T4 -6 on 1 MiB: one 256 KiB block per thread"))
    if only:
        found = [w for w in found if w.name in only]
    return found
