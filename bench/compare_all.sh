#!/usr/bin/env bash
# Hasan & Chang 2006 Tables 8 and 9 for every trace in a folder: memory and time of glibc,
# jemalloc, mimalloc, tcmalloc, Kingsley and HC presets, interleaved rounds, medians.
#
#   bash bench/compare_all.sh TRACE_DIR [ROUNDS]      (after `make`)
#   PRESETS=generic,gawk-perf ALLOCATORS=glibc,jemalloc bash bench/compare_all.sh TRACE_DIR
# Traces: bench/compare_traces.py OUTDIR records the real workloads of bench/alloc_workloads.py.
# Results also land in $HCTUNE_DB (default: TRACE_DIR/compare.db).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:?usage: bench/compare_all.sh TRACE_DIR [ROUNDS]}
rounds=${2:-5}
presets=${PRESETS:-generic,$(echo espresso-perf p2c-perf | tr ' ' ,)}
allocs=${ALLOCATORS:-glibc,jemalloc,mimalloc,tcmalloc,kingsley}
export HCTUNE_DB=${HCTUNE_DB:-$dir/compare.db}
[ -x build/hcreplay ] || { echo "run make first" >&2; exit 2; }
shopt -s nullglob
traces=("$dir"/*.hct)
[ ${#traces[@]} -gt 0 ] || { echo "no .hct traces in $dir" >&2; exit 2; }
echo "# bash bench/compare_all.sh $dir $rounds   (PRESETS=$presets ALLOCATORS=$allocs)"
echo "# $(nproc) cores, $(uname -r), $(cc --version | head -1)"
for t in "${traces[@]}"; do
  .venv/bin/python -m hctune compare "$t" --allocators "$allocs" --presets "$presets" \
    --repeat "$rounds" --inner 3
done
