#!/usr/bin/env bash
# Tracer overhead: wall time with the LD_PRELOAD tracer / without, median of 5 runs, beside
# heaptrack's on the same commands, and trace bytes per event.  Prints the command to rerun it.
#   bash bench/tracer_overhead.sh            (after make; heaptrack optional)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
TRACER=$ROOT/build/libhctrace.so
TOOL=$ROOT/build/hctrace-tool
RUNS=${RUNS:-5}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
echo "# bash bench/tracer_overhead.sh   (RUNS=$RUNS, $(nproc) cores, $(date -u +%F))"

# Workloads: an allocation-heavy python3 script (objects straight to malloc) and gcc -O2 on a
# large generated file.  The tracer runs with its defaults (no time stamps; HCTRACE_TIME=1
# adds them).
cat > "$W/alloc.py" <<'PY'
import json
d = {}
for i in range(300000):
    d[i % 5000] = json.dumps({"k": i, "v": [i] * (i % 9), "s": "x" * (i % 200)})
PY
python3 - > "$W/big.c" <<'PY'
print("int f0(int x) { return x; }")
for i in range(1, 1500):
    print(f"int f{i}(int x) {{ int a[{i % 13 + 1}]; for (int j = 0; j < {i % 13 + 1}; j++) a[j] = x + j; return a[{i % 13}] * {i} + f{i - 1}(x - 1); }}")
print("int main(void) { return f1499(3) == 0; }")
PY
# the real interpreter, not a version-manager shim (that would trace a shell too)
PY=$(python3 -c 'import sys; print(sys.executable)')
export PYTHONMALLOC=malloc      # python3's objects go to malloc (for both tracers)
PY_CMD=("$PY" "$W/alloc.py")
GCC_CMD=(gcc -O2 -c -o "$W/big.o" "$W/big.c")

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
calc() { awk "BEGIN {print $1}"; }
timeit() {  # run "$@" RUNS times, print the median wall seconds
  for _ in $(seq "$RUNS"); do
    local s e
    s=$(date +%s.%N); "$@" >/dev/null 2>&1; e=$(date +%s.%N)
    calc "$e - $s"
  done | median
}

printf "%-8s %10s %10s %7s %10s %7s %12s %10s\n" workload plain_s hctrace_s ratio heaptrack_s ratio events bytes/ev
for name in python3 gcc; do
  if [ $name = python3 ]; then cmd=("${PY_CMD[@]}"); else cmd=("${GCC_CMD[@]}"); fi
  plain=$(timeit "${cmd[@]}")
  traced=$(timeit env HCTRACE_OUT="$W/t.hct" LD_PRELOAD="$TRACER" sh -c 'rm -f "$HCTRACE_OUT"*; exec "$@"' _ "${cmd[@]}")
  rm -f "$W"/t.hct*
  env HCTRACE_OUT="$W/t.hct" LD_PRELOAD="$TRACER" "${cmd[@]}" >/dev/null 2>&1
  events=0; bytes=0
  for f in "$W"/t.hct*; do
    n=$("$TOOL" stats "$f" 1 | awk -F'[:,]' '/"events"/ {print $2+0}')
    events=$((events + n)); bytes=$((bytes + $(stat -c %s "$f")))
  done
  if command -v heaptrack >/dev/null; then
    ht=$(timeit sh -c 'cd "$0" && rm -f heaptrack.* && exec heaptrack "$@"' "$W" "${cmd[@]}")
    htr=$(calc "$ht / $plain")
  else
    ht=nan; htr=nan
  fi
  printf "%-8s %10.3f %10.3f %7.2f %10.3f %7.2f %12d %10.2f\n" $name "$plain" "$traced" \
    "$(calc "$traced / $plain")" "$ht" "$htr" "$events" "$(calc "$bytes / $events")"
done
