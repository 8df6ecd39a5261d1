"""What Hasan & Chang 2006 show of a program's allocations (Tables 1, 3, 4: sizes, small vs large
requests and bytes, maximum live bytes and objects, reallocs, frees) plus a size histogram and
the allocation graph (live bytes over time, their Fig. 5), downsampled for plotting.

`stats(path)` uses build/hctrace-tool (C, for traces of tens of millions of events) when it is
built and falls back to `compute(open_trace(path))`, the pure-Python definition; a test checks
both agree.  Anomalies (a free or realloc of an unknown pointer, an allocation at an address
already live) are counted, never fatal.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path

from hctune import native
from hctune.errors import HctuneError
from hctune.trace import spec
from hctune.trace.reader import Trace, TraceError, open_trace

SMALL_LIMIT = 1024      # Hasan & Chang 2006, Tables 1, 3, 4: "small" is 1 KiB or less
GRAPH_POINTS = 2000


def _tool() -> Path | None:
    """hctrace-tool (the checkout's build, or compiled into the user cache), None if it cannot
    be built here (then the pure-Python definition serves)."""
    try:
        return native.path("hctrace-tool")
    except HctuneError:
        return None


def _bin(size: int) -> int:
    b = 4
    while b < 63 and (1 << b) < size:
        b += 1
    return b - 4


def compute(trace: Trace, points: int = GRAPH_POINTS) -> dict:
    """The statistics of one trace, in pure Python (the reference definition)."""
    ops = {spec.OP_NAMES[c]: 0 for c in sorted(spec.OP_NAMES)}
    live: dict[int, int] = {}
    sizes: set[int] = set()
    hist: dict[int, list[int]] = {}
    cur = [0, 0, 0, 0]       # bytes, objects, small bytes, small objects
    mx = [0] * 6
    anomalies = {"free_unknown": 0, "realloc_unknown": 0, "alloc_live": 0}
    requests = small_req = bytes_req = small_bytes = threads = 0
    n = trace.count
    per = max(1, -(-n // points)) if points else 1
    g_ev, g_t, g_live = [], [], []
    bucket_max = 0
    idx = last_time = 0
    ev_sum = t_sum = prev_t = prev_bytes = 0     # headroom: mean live bytes (hctrace-tool's)

    def drop(ptr: int) -> bool:
        size = live.pop(ptr, None)
        if size is None:
            return False
        cur[0] -= size
        cur[1] -= 1
        if size <= SMALL_LIMIT:
            cur[2] -= size
            cur[3] -= 1
        return True

    def add(ptr: int, size: int) -> None:
        nonlocal requests, small_req, bytes_req, small_bytes
        requests += 1
        bytes_req += size
        if size <= SMALL_LIMIT:
            small_req += 1
            small_bytes += size
        h = hist.setdefault(_bin(size), [0, 0])
        h[0] += 1
        h[1] += size
        sizes.add(size)
        if drop(ptr):
            anomalies["alloc_live"] += 1
        live[ptr] = size
        cur[0] += size
        cur[1] += 1
        if size <= SMALL_LIMIT:
            cur[2] += size
            cur[3] += 1

    for e in trace:
        ops[spec.OP_NAMES[e.op]] += 1
        threads = max(threads, e.thread + 1)
        last_time = e.time_ns
        if e.op == spec.FREE:
            if not drop(e.ptr):
                anomalies["free_unknown"] += 1
        elif e.op == spec.REALLOC:
            if not drop(e.old_ptr):
                anomalies["realloc_unknown"] += 1
            add(e.ptr, e.size)
        else:
            add(e.ptr, e.size)
        now = (cur[0], cur[1], cur[2], cur[0] - cur[2], cur[3], cur[1] - cur[3])
        for i in range(6):
            if now[i] > mx[i]:
                mx[i] = now[i]
        bucket_max = max(bucket_max, cur[0])
        ev_sum += cur[0]
        if e.time_ns > prev_t:
            t_sum += prev_bytes * (e.time_ns - prev_t)
        prev_t = max(prev_t, e.time_ns)
        prev_bytes = cur[0]
        idx += 1
        if idx % per == 0 or idx == n:
            g_ev.append(idx)
            g_t.append(e.time_ns)
            g_live.append(bucket_max)
            bucket_max = cur[0]

    allocations = ops["malloc"] + ops["calloc"] + ops["memalign"]
    top = max(hist) if hist else -1
    return {
        "format_version": trace.header.version,
        "command": trace.header.command,
        "pid": trace.header.pid,
        "events": idx,
        "threads": threads,
        "duration_ns": last_time,
        "ops": ops,
        "allocations": allocations,
        "reallocs": ops["realloc"],
        "frees": ops["free"],
        "small_limit": SMALL_LIMIT,
        "requests": requests,
        "small_requests": small_req,
        "large_requests": requests - small_req,
        "bytes_requested": bytes_req,
        "small_bytes": small_bytes,
        "large_bytes": bytes_req - small_bytes,
        "pct_small_requests": round(100.0 * small_req / requests, 4) if requests else 0.0,
        "pct_small_bytes": round(100.0 * small_bytes / bytes_req, 4) if bytes_req else 0.0,
        "distinct_sizes": len(sizes),
        "max_live_bytes": mx[0],
        "max_live_objects": mx[1],
        "max_live_small_bytes": mx[2],
        "max_live_large_bytes": mx[3],
        "max_live_small_objects": mx[4],
        "max_live_large_objects": mx[5],
        "mean_live_bytes": (t_sum // prev_t if prev_t and t_sum else ev_sum // idx if idx else 0),
        "mean_live_weight": "time" if prev_t and t_sum else "events",
        "final_live_bytes": cur[0],
        "final_live_objects": cur[1],
        "anomalies": anomalies,
        "histogram": [{"max_size": 1 << (b + 4), "count": hist.get(b, [0, 0])[0],
                       "bytes": hist.get(b, [0, 0])[1]} for b in range(top + 1)],
        "graph": {"event": g_ev, "time_ns": g_t, "live_bytes": g_live},
    }


def stats(path: str | Path, points: int = GRAPH_POINTS, use_tool: bool | None = None,
          progress=None, progress_every: int = 1 << 20) -> dict:
    """Statistics of the trace at path (C tool when built, else pure Python). `progress(done,
    total)`: called every `progress_every` events the C tool has read (a trace of tens of millions of
    events takes seconds)."""
    path = Path(path)
    tool = _tool() if use_tool is not False else None
    if use_tool and tool is None:
        raise TraceError("hctrace-tool cannot be built here (see `hctune doctor`)")
    if tool is None:
        return compute(open_trace(path), points)
    if not path.is_file():
        open_trace(path)   # raises the reader's one-line error for a missing file / directory
    if progress is None:
        r = subprocess.run([str(tool), "stats", str(path), str(points)], capture_output=True,
                           text=True)
        out, err, rc = r.stdout, r.stderr, r.returncode
    else:
        # stdout (the JSON) to a file, stderr read line by line: no pipe fills up and blocks
        with tempfile.TemporaryFile("w+") as fo:
            proc = subprocess.Popen([str(tool), "stats", str(path), str(points)], stdout=fo,
                                    stderr=subprocess.PIPE, text=True,
                                    env={**os.environ,
                                         "HCTRACE_PROGRESS": str(max(1, progress_every))})
            errs = []
            try:
                for line in proc.stderr:
                    w = line.split()
                    if len(w) == 3 and w[0] == "progress" and w[1].isdigit() and w[2].isdigit():
                        progress(int(w[1]), int(w[2]))
                    else:
                        errs.append(line)
                rc = proc.wait()
            except BaseException:
                proc.kill()
                proc.wait()
                raise
            fo.seek(0)
            out, err = fo.read(), "".join(errs)
    if rc != 0:
        lines = (err or "hctrace-tool failed").strip().splitlines() or ["hctrace-tool failed"]
        raise TraceError(lines[-1])
    return json.loads(out)


SUMMARY_SUFFIX = ".sum"    # the preload tracer's counts, beside each trace it writes
_COUNTS = ("malloc", "calloc", "realloc", "free", "memalign", "bytes_requested")


def read_counts(path: str | Path) -> dict | None:
    """The counts the preload tracer kept while the program ran (tracer/hctrace_preload.c
    writes `<trace>.sum` at exit and before exec), None when there is no such file or it is
    not one."""
    try:
        lines = Path(path).read_text().split("\n")
    except (OSError, UnicodeDecodeError):
        return None
    if not lines or lines[0] != "hctrace-summary 1":
        return None
    counts = {}
    for line in lines[1:]:
        name, _, value = line.partition(" ")
        if name in _COUNTS and value.isdigit():
            counts[name] = int(value)
    return counts if len(counts) == len(_COUNTS) else None


def summary(path: str | Path, counts: dict | None = None) -> dict:
    """What can be said of a trace without reading its events: the header, the number of
    events and threads (from the chunk index: one small read per 32 KiB chunk), and — when the
    tracer's counts are given (read_counts) — the calls by kind and the bytes asked.  `hctune
    profile` prints this; the statistics of stats() wait for the first command that needs them
    (issue 23: profile's own work after the program exits).  "summary": True tells it apart."""
    t = open_trace(path)
    out = {"summary": True, "format_version": t.header.version, "command": t.header.command,
           "pid": t.header.pid, "events": t.count,
           "threads": 1 + max((c.thread for c in t._chunks), default=-1)}
    if counts:
        ops = {spec.OP_NAMES[c]: counts[spec.OP_NAMES[c]] for c in sorted(spec.OP_NAMES)}
        out.update(ops=ops, allocations=ops["malloc"] + ops["calloc"] + ops["memalign"],
                   reallocs=ops["realloc"], frees=ops["free"],
                   requests=ops["malloc"] + ops["calloc"] + ops["memalign"] + ops["realloc"],
                   bytes_requested=counts["bytes_requested"])
    return out
