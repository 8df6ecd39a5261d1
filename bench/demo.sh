#!/usr/bin/env bash
# hctune's demo (`make demo`): profile a real allocation-heavy program, tune HC to it for memory
# and for speed, emit the tuned malloc.c, build programs with it and compare with the other
# allocators.  A few minutes on two cores.  Everything goes to demo-out/.
#
#   bash bench/demo.sh            (from the checkout, after `make`)
#   TRIALS=40 bash bench/demo.sh  (a longer search)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${OUT:-demo-out}
TRIALS=${TRIALS:-20}
PY=$ROOT/.venv/bin/python
export HCTUNE_DB=$OUT/hctune.db
hctune() { "$PY" -m hctune "$@"; }
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

[ -x build/hcreplay ] && [ -e build/libhctrace.so ] || { echo "run make first" >&2; exit 2; }
rm -rf "$OUT" && mkdir -p "$OUT"

say "1. an input for a real program: 40,000 lines of generated text"
"$PY" - "$OUT/input.txt" <<'PYEOF'
import random, sys
rng = random.Random(2006)
words = ["".join(rng.choice("etaoinshrdlucmfw") for _ in range(rng.randint(2, 12)))
         for _ in range(6000)]
with open(sys.argv[1], "w") as f:
    for i in range(40000):
        f.write(" ".join(rng.choice(words) for _ in range(rng.randint(3, 14))) + "\n")
PYEOF
# gawk counting words, keeping a table of lines per word and joining strings: many small blocks,
# a growing hash table, frees in the middle.
AWK='{ for (i = 1; i <= NF; i++) { c[$i]++; last[$i] = $0 } }
     NR % 5000 == 0 { for (w in last) delete last[w] }
     END { n = 0; for (w in c) if (c[w] > 60) n++; print n, length(c) }'

say "2. hctune profile gawk (the LD_PRELOAD tracer)"
hctune profile -o "$OUT/gawk.hct" gawk "$AWK" "$OUT/input.txt" | tee "$OUT/gawk.expected"
hctune stats "$OUT/gawk.hct" 2>/dev/null | head -20 || true

say "3. hctune search --objective mem  ($TRIALS trials; the first are the paper's settings)"
hctune search --objective mem --trials "$TRIALS" --seed 1
say "   hctune search --objective perf ($TRIALS trials)"
hctune search --objective perf --trials "$TRIALS" --seed 1

say "4. hctune best"
MEM_STUDY=$("$PY" - <<'PYEOF'
import os, sqlite3
con = sqlite3.connect(os.environ["HCTUNE_DB"])
for o in ("mem", "perf"):
    print(con.execute("SELECT name FROM hc_studies WHERE objective = ? ORDER BY created DESC",
                      (o,)).fetchone()[0])
PYEOF
)
read -r MEM PERF <<<"$(echo $MEM_STUDY)"
hctune best --study "$MEM"
hctune best --study "$PERF"

say "5. hctune emit: tuned malloc.c (+ .so, malloc.mk, hcmalloc.cmake)"
hctune emit --study "$MEM" -o "$OUT/mem/malloc.c" --so "$OUT/mem/libhcmalloc.so"
hctune emit --study "$PERF" -o "$OUT/perf/malloc.c" --so "$OUT/perf/libhcmalloc.so"

say "6. a program built with the emitted malloc.c (tests/c/emit_wordcount.c)"
cc -O2 -std=c11 -Wall -Wextra -Werror tests/c/emit_wordcount.c -o "$OUT/wc-glibc"
cc -O2 -std=c11 -Wall -Wextra -Werror tests/c/emit_wordcount.c "$OUT/mem/malloc.c" \
   -o "$OUT/wc-hc" -lpthread
"$OUT/wc-glibc" 300000 > "$OUT/wc-glibc.out"
HCMALLOC_STATS="$OUT/wc-hc.stats" "$OUT/wc-hc" 300000 > "$OUT/wc-hc.out"
cmp "$OUT/wc-glibc.out" "$OUT/wc-hc.out" && echo "same output as with glibc: $(cat "$OUT/wc-hc.out")"

say "7. the real program under the emitted .so (LD_PRELOAD), against the other allocators"
"$PY" bench/search_real.py --out "$OUT" --expect "$OUT/gawk.expected" \
    --lib "hc tuned mem=$OUT/mem/libhcmalloc.so" --lib "hc tuned perf=$OUT/perf/libhcmalloc.so" \
    -- gawk "$AWK" "$OUT/input.txt" | tee "$OUT/real.txt"

say "8. the trace replayed on every allocator (same harness for all)"
"$PY" bench/search_compare.py --db "$HCTUNE_DB" "$OUT/gawk.hct" --repeat 5 \
    | tee "$OUT/compare.txt"

say "8b. hctune validate: the perf study's best settings in real runs of gawk (interleaved)"
hctune validate --study "$PERF" --runs 5 --top 2

say "9. hctune report"
hctune report --study "$MEM" -o "$OUT/report-mem.html"
hctune report --study "$PERF" -o "$OUT/report-perf.html"
echo "done: $OUT/ (malloc.c, libhcmalloc.so, snippets, reports, tables)"
