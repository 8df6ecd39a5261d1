#!/usr/bin/env bash
# Threaded replay (docs/replay.md, "Threaded replay") of multi-threaded programs under glibc,
# jemalloc, mimalloc, tcmalloc and HC generic: interleaved rounds, medians; each trace replayed
# on threads (wall time) and, for comparison, on one thread in recorded order (--threads off).
#
#   bash bench/threaded_replay.sh OUTDIR [ROUNDS]      (after `make`)
# Records into OUTDIR: sort --parallel=4 on a 300,000-line file, python3 with 4 threads building
# and serialising dicts (PYTHONMALLOC=malloc, so every object goes through malloc), and
# tests/c/replay_threads (4 threads handing blocks round a ring).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:?usage: bench/threaded_replay.sh OUTDIR [ROUNDS]}
rounds=${2:-3}
allocs=${ALLOCATORS:-glibc,jemalloc,mimalloc,tcmalloc}
mkdir -p "$dir"
export HCTUNE_DB=${HCTUNE_DB:-$dir/threaded.db}
[ -x build/hcreplay ] || { echo "run make first" >&2; exit 2; }
tracer=$PWD/build/libhctrace.so
trace() { # OUT CMD...: record CMD's heap trace into OUT (fresh)
  local out=$1; shift
  rm -f "$out" "$out".*
  env HCTRACE_OUT="$out" LD_PRELOAD="$tracer" "$@" > /dev/null
}
/usr/bin/env python3 -c '
import random, sys
r = random.Random(1)
with open(sys.argv[1], "w") as f:
    for i in range(300000):
        f.write("%08x %s\n" % (r.getrandbits(32), "x" * r.randrange(1, 40)))' "$dir/lines.txt"
cat > "$dir/threads.py" <<'PY'
import json, threading
def work(k):
    for _ in range(10):
        d = {str(i * k): [i, str(i)] * (i % 5) for i in range(3000)}
        json.loads(json.dumps(d))
ts = [threading.Thread(target=work, args=(k,)) for k in range(1, 5)]
for t in ts:
    t.start()
for t in ts:
    t.join()
PY
cc -O2 -pthread -o "$dir/replay_threads" tests/c/replay_threads.c
trace "$dir/sort.hct" sort --parallel=4 -S 10M "$dir/lines.txt"
py=/usr/bin/python3; [ -x $py ] || py=$(command -v python3)
PYTHONMALLOC=malloc PYTHONHASHSEED=0 trace "$dir/python-threads.hct" "$py" "$dir/threads.py"
trace "$dir/ring.hct" "$dir/replay_threads" 400
echo "# bash bench/threaded_replay.sh $dir $rounds   (ALLOCATORS=$allocs)"
echo "# $(nproc) cores, $(uname -r), $(cc --version | head -1), load: $(cut -d' ' -f1-3 /proc/loadavg)"
for t in "$dir/sort.hct" "$dir/python-threads.hct" "$dir/ring.hct"; do
  for mode in auto off; do
    .venv/bin/python -m hctune compare "$t" --allocators "$allocs" --presets generic \
      --repeat "$rounds" --inner 3 --threads "$mode"
  done
done
