#!/usr/bin/env bash
# What single-threaded programs pay for the thread cache and the arenas: instructions per
# replayed operation (callgrind, deterministic) of generic HC at BASE (default d1fb9e5, the last
# commit without either) against generic HC now, with TCACHE_COUNT=0, and with ARENAS=1, on a
# gawk and a python3 trace profiled here.  Prints the command to rerun it.
#   bash bench/tcache_single_thread.sh          (after make; needs git, valgrind, gawk)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BASE=${BASE:-d1fb9e5}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
PY=$ROOT/.venv/bin/python
HCTUNE=("$ROOT/.venv/bin/hctune" --db "$W/bench.db")
echo "# BASE=$BASE bash bench/tcache_single_thread.sh   ($(git rev-parse --short HEAD), $(date -u +%F))"

# generic HC as it was at BASE: that commit's sources rendered by that commit's renderer.
mkdir -p "$W/base"
git archive "$BASE" allocator templates configs tuner pyproject.toml | tar -x -C "$W/base"
PYTHONPATH="$W/base/tuner" "$PY" -c 'import sys; sys.argv[0] = "render"
from hctune import render; sys.exit(render.main(["--preset", "generic", "-o", sys.argv[1]]))' "$W/base.c"
"$PY" -m hctune.render --preset generic -o "$W/now.c"
"$PY" -m hctune.render --preset generic --set TCACHE_COUNT=0 -o "$W/off.c"
"$PY" -m hctune.render --preset generic --set ARENAS=1 -o "$W/one.c"
for v in base now off one; do
  cc -O2 -g -fPIC -shared -pthread -o "$W/lib$v.so" "$W/$v.c"
done

# Two single-threaded workloads: gawk counting words, python3 with every object through malloc.
"$PY" - "$W/text.txt" <<'PY'
import random, sys
random.seed(1)
words = ["".join(random.choice("abcdefghij") for _ in range(random.randint(2, 9))) for _ in range(5000)]
with open(sys.argv[1], "w") as f:
    f.write("\n".join(" ".join(random.choice(words) for _ in range(12)) for _ in range(40000)))
PY
cat > "$W/work.py" <<'PY'
import json
d = {}
for i in range(100000):
    s = str(i) * (i % 13)
    d[s[:20]] = [s, i]
    if i % 3 == 0:
        d.pop(s[:20], None)
print(len(json.dumps(d)) % 1000)
PY
(cd "$W" && "${HCTUNE[@]}" profile gawk '{for(i=1;i<=NF;i++)c[$i]++} END{for(w in c) n++; print n}' text.txt >/dev/null)
(cd "$W" && PYTHONMALLOC=malloc "${HCTUNE[@]}" profile /usr/bin/python3 work.py >/dev/null)

printf "| trace | HC at %s | HC now | now / %s | TCACHE_COUNT=0 | / %s | ARENAS=1 | / %s |\n|---|---|---|---|---|---|---|---|\n" "$BASE" "$BASE" "$BASE" "$BASE"
for t in "$W"/hctune-traces/*.hct; do
  declare -A ipo=()
  for v in base now off one; do
    ipo[$v]=$("${HCTUNE[@]}" replay "$t" -a "$W/lib$v.so" --metric instructions -n 1 --json |
              "$PY" -c 'import json, sys; print(json.load(sys.stdin)["instructions_per_op"])')
  done
  awk -v n="$(basename "$t" | cut -d- -f1)" -v b="${ipo[base]}" -v w="${ipo[now]}" -v o="${ipo[off]}" \
    -v a="${ipo[one]}" 'BEGIN { printf "| %s | %.2f | %.2f | %.4f | %.2f | %.4f | %.2f | %.4f |\n", n, b, w, w / b, o, o / b, a, a / b }'
done
