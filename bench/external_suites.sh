#!/usr/bin/env bash
# Other people's tests under HC (issue 35): mimalloc's test-stress, fetched and built outside
# the repository (never committed), run under LD_PRELOAD of each library given, at 1 to 64
# threads, each run under a time limit; prints the pass counts per library as Markdown.
#
#   bench/external_suites.sh [--work DIR] [--mimalloc SRC] [--runs N] LIB...
#
#   LIB          a malloc shared library to preload, or "glibc" for none
#                (e.g. build/libhcmalloc.so build/libhcmalloc-debug.so)
#   --work DIR   where sources and binaries go (default /tmp/hctune-external)
#   --mimalloc SRC  a mimalloc checkout to use instead of cloning
#                https://github.com/microsoft/mimalloc (depth 1) into DIR
#   --runs N     runs of each thread count (default 2)
#
# test-stress is built with -DUSE_STD_MALLOC (plain malloc/calloc/realloc/free), so it tests
# whatever the preloaded library provides: each run allocates, transfers blocks between
# threads and frees them over ITER generations of threads, and checks every block's contents
# (an assert).  A run passes when it exits 0 within the limit.
set -euo pipefail

work=/tmp/hctune-external
mimalloc=""
runs=2
libs=()
while [ $# -gt 0 ]; do
    case "$1" in
        --work) work=$2; shift 2 ;;
        --mimalloc) mimalloc=$2; shift 2 ;;
        --runs) runs=$2; shift 2 ;;
        -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
        -*) echo "external_suites.sh: unknown option $1" >&2; exit 2 ;;
        *) libs+=("$1"); shift ;;
    esac
done
if [ ${#libs[@]} -eq 0 ]; then
    echo "external_suites.sh: name at least one library (or glibc)" >&2
    exit 2
fi
for lib in "${libs[@]}"; do
    if [ "$lib" != glibc ] && [ ! -f "$lib" ]; then
        echo "external_suites.sh: no such library: $lib" >&2
        exit 2
    fi
done
mkdir -p "$work"
if [ -z "$mimalloc" ]; then
    mimalloc=$work/mimalloc
    [ -d "$mimalloc" ] || git clone -q --depth 1 https://github.com/microsoft/mimalloc "$mimalloc"
fi
src=$mimalloc/test/test-stress.c
if [ ! -f "$src" ]; then
    echo "external_suites.sh: $src not found" >&2
    exit 2
fi
stress=$work/test-stress
cc -O2 -DNDEBUG -DUSE_STD_MALLOC -pthread -o "$stress" "$src"

threads=(1 4 16 64)
echo "mimalloc test-stress (SCALE 25, ITER 10), $runs runs per thread count, $(nproc) cores:"
echo "\`bench/external_suites.sh --runs $runs ${libs[*]}\`"
echo
echo "| library | $(printf '%s threads | ' "${threads[@]}")passed |"
echo "|---|$(printf -- '---|%.0s' "${threads[@]}")---|"
for lib in "${libs[@]}"; do
    row="| $(basename "$lib") |"
    passed=0
    total=0
    for t in "${threads[@]}"; do
        ok=0
        for ((r = 0; r < runs; r++)); do
            total=$((total + 1))
            if [ "$lib" = glibc ]; then
                env -u LD_PRELOAD timeout -s KILL 300 "$stress" "$t" 25 10 >/dev/null 2>&1 && ok=$((ok + 1))
            else
                LD_PRELOAD=$(readlink -f "$lib") timeout -s KILL 300 "$stress" "$t" 25 10 >/dev/null 2>&1 \
                    && ok=$((ok + 1))
            fi
        done
        passed=$((passed + ok))
        row="$row $ok/$runs |"
    done
    echo "$row $passed/$total |"
done
