"""The LD_PRELOAD tracer against a program whose every allocator call is known
(tests/c/trace_known.c): two threads, a forked child ending in _exit, a forked child that execs,
the memalign family, realloc's special cases.  Each logged call must be in its process's
trace, in order, on one thread, exactly once; nothing of the parent may leak into a child."""

from __future__ import annotations

import collections
import os
import subprocess

import pytest

from hctune import paths
from hctune.trace import open_trace, spec
from hctune.trace.stats import compute, stats

PROGRAM = paths.BUILD / "tests" / "trace_known"
TRACER = paths.BUILD / "libhctrace.so"
OPS = {v: k for k, v in spec.OP_NAMES.items()}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    if not PROGRAM.exists() or not TRACER.exists():
        pytest.fail("build/tests/trace_known or build/libhctrace.so missing: run make test")
    d = tmp_path_factory.mktemp("known")
    env = dict(os.environ, TRACE_KNOWN_LOG=str(d / "log"), HCTRACE_OUT=str(d / "k.hct"),
               LD_PRELOAD=str(TRACER))
    subprocess.run([str(PROGRAM)], env=env, check=True, timeout=60)
    log = collections.defaultdict(list)      # (pid, label) -> [(op, ptr, old, size, align)]
    for line in (d / "log").read_text().splitlines():
        pid, label, op, ptr, old, size, align = line.split()
        log[int(pid), label].append((OPS[op], int(ptr, 16), int(old, 16), int(size), int(align)))
    traces = {p.name: open_trace(p) for p in d.glob("k.hct*")}
    return d, log, traces


def _key(e):
    return (e.op, e.ptr, e.old_ptr, e.size, e.align)


def _find_in_order(events, wanted):
    """Positions of `wanted` as an in-order subsequence of the events of one trace thread (None
    if no thread has them all).  Matching within one thread: another thread may have an event
    with the same key (glibc hands the same address and size to two threads in turn), and a
    match across threads would then depend on the scheduling."""
    by_thread = collections.defaultdict(list)
    for i, e in enumerate(events):
        by_thread[e.thread].append(i)
    for positions in by_thread.values():
        k, out = 0, []
        for w in wanted:
            while k < len(positions) and _key(events[positions[k]]) != w:
                k += 1
            if k == len(positions):
                break
            out.append(positions[k])
            k += 1
        else:
            return out
    return None


def _by_pid(traces, pid, command_word):
    found = [t for t in traces.values()
             if t.header.pid == pid and command_word in t.header.command]
    assert len(found) == 1, [(n, t.header.pid, t.header.command) for n, t in traces.items()]
    return found[0]


def test_every_process_has_its_own_file(run):
    d, log, traces = run
    pids = {pid for pid, _ in log}
    assert len(pids) == 3                     # main, the _exit child, the exec child
    assert "k.hct" in traces                  # the first process writes HCTRACE_OUT itself
    assert len(traces) == 4                   # + /bin/true after the exec
    assert any(t.header.command == "true" for t in traces.values())


def test_parent_trace_has_every_call_in_order(run):
    d, log, traces = run
    main_pid = next(pid for pid, label in log if label == "t1")
    t = traces["k.hct"]
    assert t.header.pid == main_pid
    events = list(t)
    threads = {}
    for label in ("main", "t1", "t2"):
        pos = _find_in_order(events, log[main_pid, label])
        assert pos is not None, f"{label}: calls missing from the trace"
        ids = {events[i].thread for i in pos}
        assert len(ids) == 1, f"{label} spread over trace threads {ids}"
        threads[label] = ids.pop()
    assert len(set(threads.values())) == 3 and threads["main"] == 0
    # exactly once: no event of the parent is written twice (e.g. by a forked child)
    counts = collections.Counter(_key(e) for e in events)
    logged = collections.Counter(w for label in ("main", "t1", "t2")
                                 for w in log[main_pid, label] if w[0] != spec.FREE)
    for w, n in logged.items():
        assert counts[w] == n, w
    st = compute(t)
    assert st["anomalies"] == {"free_unknown": 0, "realloc_unknown": 0, "alloc_live": 0}
    assert st["threads"] == 3
    # the two threads' blocks were freed by the main thread after join: global order holds
    assert st["final_live_objects"] >= 2
    assert st["ops"]["memalign"] >= 5 and st["ops"]["realloc"] >= 1


def test_known_sequence_stats_exact(run):
    """The statistics of the program's own calls, taken from the trace, equal the ones of
    the log, exactly (libc's own allocations are the only other events)."""
    d, log, traces = run
    main_pid = next(pid for pid, label in log if label == "t1")
    events = list(traces["k.hct"])
    mine = set()
    for label in ("main", "t1", "t2"):
        mine.update(_find_in_order(events, log[main_pid, label]))
    picked = [e for i, e in enumerate(events) if i in mine]

    class _Fake:
        def __init__(self, evs):
            self.evs, self.count = evs, len(evs)
            self.header = traces["k.hct"].header

        def __iter__(self):
            return iter(self.evs)

    from_trace = compute(_Fake(picked))
    assert from_trace["events"] == sum(len(log[main_pid, lb]) for lb in ("main", "t1", "t2"))
    assert from_trace["allocations"] == 100 + 1 + 1 + 5 + 2 * (1 + 400)
    assert from_trace["reallocs"] == 1
    assert from_trace["frees"] == 1 + 49 + 2 * 200 + 2 * 200 + 2 + 47 + 7
    assert from_trace["final_live_objects"] == 3            # p[0] (realloc'd), p[97], p[99]
    assert from_trace["final_live_bytes"] == 5000 + (97 * 37 % 2100 + 1) + (99 * 37 % 2100 + 1)
    assert from_trace["anomalies"] == {"free_unknown": 0, "realloc_unknown": 0, "alloc_live": 0}


@pytest.mark.parametrize("label, n_events", [("child", 75), ("child2", 10)])
def test_children_traces(run, label, n_events):
    d, log, traces = run
    pid = next(p for p, lb in log if lb == label)
    t = _by_pid(traces, pid, "trace_known")
    events = list(t)
    assert _find_in_order(events, log[pid, label]) is not None   # flushed by _exit / exec
    assert len(log[pid, label]) == n_events
    parent = {w for (p, lb), ws in log.items() if p != pid for w in ws if w[0] != spec.FREE}
    assert not parent & {_key(e) for e in events}, "parent's buffered events leaked into child"
    assert stats(d / t.path.name) == compute(t)
