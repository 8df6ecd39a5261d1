#!/usr/bin/env bash
# The headline: on real programs, how does HC tuned by hctune compare with glibc, jemalloc,
# mimalloc and tcmalloc?  For each program: profile it (LD_PRELOAD tracer) on a generated input,
# search for perf (time) and for mem, then replay the trace on every allocator in the same
# harness.  One table: tuned-perf time and tuned-mem peak RSS relative to each allocator.
#
#   bash bench/headline.sh              (TRIALS=30 per search; OUT=bench-out/headline)
# Long (tens of minutes on two cores): a benchmark, never a test.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-bench-out/headline}
TRIALS=${TRIALS:-30}
PY=$PWD/.venv/bin/python
export HCTUNE_DB=$OUT/hctune.db
hctune() { "$PY" -m hctune "$@"; }
mkdir -p "$OUT"

"$PY" - "$OUT" <<'PYEOF'
import random, sys
out = sys.argv[1]
rng = random.Random(2006)
words = ["".join(rng.choice("etaoinshrdlucmfwypvbgkq") for _ in range(rng.randint(2, 11)))
         for _ in range(8000)]
with open(f"{out}/text.txt", "w") as f:
    for _ in range(30000):
        f.write(" ".join(rng.choice(words) for _ in range(rng.randint(3, 14))) + "\n")
with open(f"{out}/doc.ms", "w") as f:
    for s in range(120):
        f.write(f".NH\nSection {s}\n.PP\n")
        for _ in range(25):
            f.write(" ".join(rng.choice(words) for _ in range(rng.randint(8, 30))) + ".\n")
        f.write(".IP \\(bu\n" + " ".join(rng.choice(words) for _ in range(20)) + "\n")
with open(f"{out}/work.py", "w") as f:
    f.write("""
import random
rng = random.Random(2006)
keep = []
for r in range(8):
    d = {f"k{i}-{r}": [i] * (i % 7) for i in range(20000)}
    s = {(i, str(i)) for i in range(0, 30000, 3)}
    keep.append([d[k] for k in list(d)[::400]])
    if len(keep) > 5:
        keep.pop(rng.randrange(len(keep)))
    del d, s
print(sum(len(x) for x in keep))
""")
with open(f"{out}/work.sql", "w") as f:
    f.write("CREATE TABLE t(a INTEGER, b TEXT);\nBEGIN;\n")
    for i in range(40000):
        f.write(f"INSERT INTO t VALUES({rng.randrange(10**6)}, '{rng.choice(words) * rng.randint(1, 6)}');\n")
    f.write("COMMIT;\nCREATE INDEX ti ON t(b);\n"
            "SELECT b, COUNT(*), SUM(a) FROM t GROUP BY b ORDER BY 2 DESC LIMIT 5;\n"
            "DELETE FROM t WHERE a % 3 = 0;\nSELECT COUNT(*) FROM t;\n")
PYEOF
groff -Tps -ms "$OUT/doc.ms" > "$OUT/doc.ps"

AWK='{ for (i = 1; i <= NF; i++) { c[$i]++; last[$i] = $0 } } NR % 4000 == 0 { for (w in last) delete last[w] } END { print length(c) }'
profile() {  # name, command...
  local name=$1; shift
  [ -s "$OUT/$name.hct" ] || hctune profile -o "$OUT/$name.hct" "$@" > /dev/null
}
profile gawk gawk "$AWK" "$OUT/text.txt"
profile groff troff -Tps -ms "$OUT/doc.ms"
profile ghostscript gs -q -dNOPAUSE -dBATCH -dSAFER -sDEVICE=bbox "$OUT/doc.ps" 2>/dev/null
# The system's python3 itself (not a version-manager shim that would exec it), with every
# object from malloc: pymalloc would otherwise serve small objects from its own arenas.
PYTHONMALLOC=malloc profile python3 "$(command -v /usr/bin/python3 || command -v python3)" "$OUT/work.py"
profile sqlite3 sqlite3 :memory: -init "$OUT/work.sql" .quit

for name in gawk groff ghostscript python3 sqlite3; do
  for objective in perf mem; do
    echo "== $name: search --objective $objective ($TRIALS trials)" >&2
    hctune search "$OUT/$name.hct" --objective "$objective" --trials "$TRIALS" --seed 1 \
      --allocators hc --study "headline-$name-$objective" > /dev/null
  done
done
"$PY" bench/search_headline.py --db "$HCTUNE_DB" --out "$OUT" gawk groff ghostscript python3 sqlite3 \
  | tee "$OUT/headline.txt"
