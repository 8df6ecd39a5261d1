#!/usr/bin/env bash
# What the preload tracer costs per allocator call, counted (callgrind instructions, the whole
# process): untraced, traced whole, and inside a window (HCTRACE_DURATION: a window open from
# the start, which keeps the table of live blocks, docs/tracing.md).  The program is
# bench/pair_loop.c: N malloc/free pairs of SIZE bytes on one thread, 64 blocks live.
#   bash bench/tracer_window_cost.sh [N] [SIZE]        (after make; needs valgrind)
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-1000000}
SIZE=${2:-64}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
cc -O2 -fno-builtin -pthread -o "$W/pair_loop" bench/pair_loop.c
echo "# bash bench/tracer_window_cost.sh $N $SIZE   ($(date -u +%F); counts, not times)"
count() {   # instructions of one run of pair_loop under the given environment
    env "$@" valgrind --tool=callgrind --callgrind-out-file="$W/cg" "$W/pair_loop" "$N" "$SIZE" \
        2>&1 >/dev/null | sed -n 's/.*Collected : //p'
}
base=$(count X=1)
whole=$(count HCTRACE_OUT="$W/w.hct" LD_PRELOAD="$PWD/build/libhctrace.so")
rm -f "$W"/w.hct*
window=$(count HCTRACE_OUT="$W/w.hct" HCTRACE_DURATION=100000 LD_PRELOAD="$PWD/build/libhctrace.so")
calls=$((2 * N))
printf "%-28s %15s %18s\n" "run" "instructions" "tracer per call"
printf "%-28s %15d %18s\n" "untraced" "$base" "-"
printf "%-28s %15d %18.1f\n" "traced whole" "$whole" "$(echo "($whole - $base) / $calls" | bc -l)"
printf "%-28s %15d %18.1f\n" "inside a window (table)" "$window" "$(echo "($window - $base) / $calls" | bc -l)"
