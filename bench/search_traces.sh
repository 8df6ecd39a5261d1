#!/bin/sh
# The three traces of issue 37's registered runs (docs/lab/search-registration.md): real
# programs on generated inputs, 10-30 M events each, recorded with the project's tracer
# (`hctune profile`), kept out of git.
#
#     sh bench/search_traces.sh [DIR]          # default DIR: /tmp/hctune-search-traces
#
# jq.hct:  jq filtering 107 MB of generated JSON (the issue's ~24 M-event case; the generator
#          of bench/search_rate.py's docstring at 660,000 records instead of 120,000);
# lua.hct: lua5.4 running bench/pgo_generations.lua (generations of records built and dropped
#          whole) with 110,000 records and 8 generations;
# py.hct:  python3 (PYTHONMALLOC=malloc, so every object goes through malloc) running
#          bench/pgo_phases.py (phases of dicts of lists of tuples) with 130,000 items.
# Prints each trace's event count (hctune stats).
set -eu
HERE=$(cd "$(dirname "$0")/.." && pwd)
DIR=${1:-/tmp/hctune-search-traces}
PY=${PYTHON:-$HERE/.venv/bin/python}
[ -x "$PY" ] || PY=python3
mkdir -p "$DIR"
export PYTHONPATH="$HERE/tuner"
DB="$DIR/traces.db"
hct() { "$PY" -m hctune --db "$DB" "$@"; }

if [ ! -f "$DIR/data.json" ]; then
    python3 -c "
import json, random
random.seed(1)
json.dump([{'id': i, 'name': 'user%d' % i,
            'tags': ['t%d' % random.randint(0, 50) for _ in range(random.randint(1, 6))],
            'score': random.random(),
            'nested': {'a': [random.randint(0, 9) for _ in range(random.randint(0, 8))],
                       'b': 'x' * random.randint(1, 40)}} for i in range(660000)],
          open('$DIR/data.json', 'w'))"
fi
[ -f "$DIR/jq.hct" ] || hct profile -o "$DIR/jq.hct" jq -c '[.[] | select(.score > 0.3) |
    {id, name, n: (.tags|length), s: (.nested.a|add)}] | group_by(.n) |
    map({n: .[0].n, c: length})' "$DIR/data.json" > /dev/null
[ -f "$DIR/lua.hct" ] || hct profile -o "$DIR/lua.hct" lua5.4 "$HERE/bench/pgo_generations.lua" \
    110000 8 1 > /dev/null
[ -f "$DIR/py.hct" ] || PYTHONMALLOC=malloc PYTHONHASHSEED=0 hct profile -o "$DIR/py.hct" \
    /usr/bin/python3 "$HERE/bench/pgo_phases.py" 130000 1 > /dev/null
for t in jq lua py; do
    printf '%s.hct: ' "$t"
    hct stats "$DIR/$t.hct" --json 2>/dev/null | "$PY" -c \
        "import json, sys; s = json.load(sys.stdin); print(f\"{s['events']:,} events, max live {s['max_live_bytes'] / 2**20:.1f} MiB\")"
done
echo "reproduce: sh bench/search_traces.sh $DIR"
