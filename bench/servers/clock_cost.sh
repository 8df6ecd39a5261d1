#!/usr/bin/env bash
# What the trace's clock costs the tracer (trace format 2, docs/trace-format.md): CPU time (user
# + sys) of bench/pair_loop.c (N malloc/free pairs of SIZE bytes, one thread) traced with the
# clock (the default) and without it (HCTRACE_CLOCK=0), interleaved, RUNS each; medians and
# ranges, and the trace's bytes per event both ways.
#   bash bench/servers/clock_cost.sh [N] [SIZE]        (after make; RUNS=9 by default)
set -euo pipefail
cd "$(dirname "$0")/../.."
N=${1:-2000000}; SIZE=${2:-64}; RUNS=${RUNS:-9}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
cc -O2 -fno-builtin -pthread -o "$W/pair_loop" bench/pair_loop.c
echo "# bash bench/servers/clock_cost.sh $N $SIZE   (RUNS=$RUNS, $(nproc) cores, $(date -u +%F))"
cpu() {   # user+sys seconds of one traced run; $1: HCTRACE_CLOCK value
    rm -f "$W"/t.hct*
    /usr/bin/time -f "%U %S" -o "$W/time" env HCTRACE_CLOCK="$1" HCTRACE_OUT="$W/t.hct" \
        LD_PRELOAD="$PWD/build/libhctrace.so" "$W/pair_loop" "$N" "$SIZE" > /dev/null
    awk '{printf "%.3f\n", $1 + $2}' "$W/time"
}
: > "$W/on"; : > "$W/off"
for _ in $(seq "$RUNS"); do
    cpu 1 >> "$W/on"; echo "$(stat -c %s "$W/t.hct")" > "$W/on.bytes"
    cpu 0 >> "$W/off"; echo "$(stat -c %s "$W/t.hct")" > "$W/off.bytes"
done
stat_line() { sort -n "$W/$1" | awk -v name="$2" -v b="$(cat "$W/$1.bytes")" -v ev=$((2 * N)) \
    '{a[NR]=$1} END {printf "%-18s median %.3f s (range %.3f-%.3f), %.2f bytes/event\n", name,
      a[int((NR+1)/2)], a[1], a[NR], b/ev}'; }
stat_line off "without the clock"
stat_line on "with the clock"
