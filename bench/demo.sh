#!/usr/bin/env bash
# hctune's demo (`make demo`): profile a real allocation-heavy program, search HC's knobs and
# every installed allocator's (glibc, jemalloc, mimalloc, tcmalloc) for memory and for speed,
# validate in real runs, emit the recommendation (an environment file, whichever allocator won)
# and HC's tuned malloc.c, build programs with it and compare with the other allocators.
# A few minutes on two cores.  Everything goes to demo-out/.
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
hctune stats "$OUT/gawk.hct"
say "2b. hctune explain: where each allocator's RSS goes at the trace's peak"
hctune explain "$OUT/gawk.hct"

say "3. hctune search --objective mem  ($TRIALS trials: HC and every allocator installed, each
   with its own knobs; the first trials are each allocator as it comes, its documents' advice
   and the paper's settings)"
hctune search --objective mem --trials "$TRIALS" --seed 1
say "   hctune search --objective perf ($TRIALS trials)"
hctune search --objective perf --trials "$TRIALS" --seed 1

say "4. hctune studies; hctune best (each study named by its objective)"
hctune studies
hctune best --objective mem
hctune best --objective perf

say "4b. hctune validate: each study's best settings in real runs of gawk (interleaved); emit,
   best and report then use what the real runs chose"
hctune validate --objective mem --runs 5 --top 2
hctune validate --objective perf --runs 5 --top 2

say "5. hctune emit --env: the recommendation over every allocator (HC, or glibc, jemalloc...
   with its variables) as a shell file to source; then HC's winner as malloc.c (+ .so,
   malloc.mk, hcmalloc.cmake), which says when another allocator was recommended"
for objective in mem perf; do
  hctune emit --objective $objective --env "$OUT/$objective/hctune.env"
  grep '^# recommendation\|^# verdict' "$OUT/$objective/hctune.env" || true
  # the file is sourced as a user would, and gawk under it gives the same answer
  (. "$OUT/$objective/hctune.env" && gawk "$AWK" "$OUT/input.txt") | cmp -s - "$OUT/gawk.expected" \
    && echo "   sourced $OUT/$objective/hctune.env: gawk's output unchanged" \
    || { echo "   $OUT/$objective/hctune.env: sourcing it changed gawk's output" >&2; exit 1; }
done
hctune emit --objective mem -o "$OUT/mem/malloc.c" --so "$OUT/mem/libhcmalloc.so"
hctune emit --objective perf -o "$OUT/perf/malloc.c" --so "$OUT/perf/libhcmalloc.so"

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
    -- gawk "$AWK" "$OUT/input.txt" 2> "$OUT/real.notes" | tee "$OUT/real.txt" \
    || { cat "$OUT/real.notes" >&2; exit 1; }
echo                                   # the table, then its notes: not interleaved
cat "$OUT/real.notes"

say "8. the trace replayed on every allocator (same harness for all)"
"$PY" bench/search_compare.py --db "$HCTUNE_DB" "$OUT/gawk.hct" --repeat 5 \
    | tee "$OUT/compare.txt"

say "9. hctune report"
hctune report --objective mem -o "$OUT/report-mem.html"
hctune report --objective perf -o "$OUT/report-perf.html"

say "10. the answer: each study's verdict from its real runs"
hctune studies
echo "done: $OUT/ (hctune.env, malloc.c, libhcmalloc.so, snippets, reports, tables)"
