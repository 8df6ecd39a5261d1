#!/usr/bin/env bash
# The README's results table: three Debian programs (gawk, sqlite3, python3 on generated
# inputs), each profiled on input a, searched for mem over HC and every installed allocator
# (12 trials), then validated on input b (5 interleaved real runs a candidate), the answer set
# against the smallest allocator as it comes. A few minutes on 2 cores; prints the command, the
# date, the commit and the load, then the table (bench/xalloc_headline.py's).
#
#   bash bench/readme_table.sh [OUTDIR]
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-bench-out/readme-table}
PY=${PY:-.venv/bin/python}
echo "# bash bench/readme_table.sh $OUT  ($(date -u +%F), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg))"
exec "$PY" bench/xalloc_headline.py --out "$OUT" --trials 12 --runs 5 --scale 0.3 \
    --objectives mem gawk sqlite3 python3
