"""The trace's clock (format version 2, flags.CLOCK; issue 31): every chunk carries the coarse
time of its first event and spans less than the clock's quantum, so each event's time is known
to within it, on every trace path (the whole run, a window, a forked child; version-1 traces and
imports without a clock still read), and the replay's mean RSS is weighted by the trace's time:
an idle phase weighs the heap held through it, however few its events."""

import json
import struct
import subprocess

import pytest

from conftest import BUILD, hctune
from hctune.trace import open_trace, spec
from hctune.trace.writer import Writer

pytestmark = pytest.mark.timeout(120)

S = 1_000_000_000
PAUSE_MS = 300


def _replay(path) -> dict:
    r = subprocess.run([str(BUILD / "hcreplay"), "--json", "--repeat", "1", str(path)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _phases(path, clock: bool):
    """Phase A at 0 s: 1,024 blocks of 16 KiB (16 MiB live); idle; phase B at 9 s: all freed;
    phase C at 10 s: 512 small malloc/free pairs. 3,072 ops: the replay samples its RSS every
    1,024 ops, at the ends of the phases."""
    with Writer(path, command="phases", clock=clock) as w:
        base = 1 << 32
        for i in range(1024):
            w.malloc(base + i * 32768, 16384, time_ns=0)
        for i in range(1024):
            w.free(base + i * 32768, time_ns=9 * S)
        for _ in range(512):
            w.malloc(base, 16, time_ns=10 * S)
            w.free(base, time_ns=10 * S)
    return path


def test_replay_mean_is_weighted_by_the_trace_time(tmp_path):
    r = _replay(_phases(tmp_path / "clock.hct", clock=True))
    assert r["mean_rss_weight"] == "time" and r["trace_seconds"] == pytest.approx(10.0)
    # 9 s holding phase A's heap (the first sample: 16 MiB and the allocator's own), then 1 s
    # holding what is left after phase B: mean = 0.9 x A + 0.1 x B
    peak, final = r["peak_rss_bytes"], r["final_rss_bytes"]
    assert peak >= 15 << 20   # over the replay's baseline, which holds some of the allocator's own
    expected = 0.9 * peak + 0.1 * final
    assert r["mean_rss_bytes"] == pytest.approx(expected, rel=0.05)
    # without the clock the same events weigh by ops: phase A is a third of them
    u = _replay(_phases(tmp_path / "noclock.hct", clock=False))
    assert u["mean_rss_weight"] == "ops" and u["mean_rss_bytes"] < 0.5 * peak


def _times(path):
    """(time of phase 1's first malloc, of phase 2's first free) in a clock_phases trace."""
    t = open_trace(path)
    assert t.header.version == spec.VERSION and t.header.flags & spec.FLAG_CLOCK
    evs = list(t)
    first_malloc = next(e for e in evs if e.op == spec.MALLOC and 1000 <= e.size < 1200)
    first_free = next(e for e in evs if e.op == spec.FREE and e.seq > first_malloc.seq)
    return first_malloc.time_ns, first_free.time_ns, evs


def _gap_is_seen(path):
    t1, t2, evs = _times(path)
    # the pause, to within the clock's quantum (and a tick of the coarse clock)
    assert t2 - t1 >= PAUSE_MS * 1_000_000 - spec.CLOCK_QUANTUM_NS - 5_000_000, (t1, t2)
    assert all(a.time_ns <= b.time_ns for a, b in zip(evs, evs[1:]))


def test_the_tracer_clock_survives_fork_and_windows(c_program, tmp_path):
    prog = c_program("clock_phases")
    db = tmp_path / "hctune.db"
    hctune(db, "profile", "-o", tmp_path / "f.hct", prog, PAUSE_MS, "fork", cwd=tmp_path)
    traces = sorted(tmp_path.glob("f*.hct"))
    assert len(traces) == 2                  # the parent's and the forked child's
    for p in traces:
        _gap_is_seen(p)
    # a window (from 0.1 s): the live blocks written when it opens carry its time
    hctune(db, "profile", "-o", tmp_path / "w.hct", "--start-after", 0.1, prog, PAUSE_MS,
           cwd=tmp_path)
    t = open_trace(tmp_path / "w.hct")
    assert t.header.flags & spec.FLAG_CLOCK
    evs = list(t)
    frees = [e for e in evs if e.op == spec.FREE]
    table = [e for e in evs if e.op == spec.MALLOC and 1000 <= e.size < 1200]
    # the window opens at the first look at the clock after 0.1 s: in the pause's end, when
    # the frees begin (the tracer looks every few calls); its events are all after the pause
    assert len(table) > 150 and len(frees) >= len(table)
    assert min(e.time_ns for e in evs) >= PAUSE_MS * 1_000_000 - spec.CLOCK_QUANTUM_NS
    assert _replay(tmp_path / "f.hct")["mean_rss_weight"] == "time"


def test_version_1_traces_and_imports_without_a_clock_still_read(tmp_path):
    p = _phases(tmp_path / "old.hct", clock=False)
    data = bytearray(p.read_bytes())
    struct.pack_into("<H", data, spec.H["VERSION_OFFSET"], 1)
    p.write_bytes(bytes(data))
    t = open_trace(p)
    assert t.header.version == 1 and t.count == 3072
    assert {e.time_ns for e in t} == {0}
    r = subprocess.run([str(BUILD / "hctrace-tool"), "stats", str(p)], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert _replay(p)["mean_rss_weight"] == "ops"
    # an imported text trace (no clock in that format) replays by ops too
    txt = tmp_path / "old.txt"
    txt.write_text("".join(f"Allocate {i} {100 + i}\n" for i in range(2000))
                   + "".join(f"Free {i}\n" for i in range(2000)))
    db = tmp_path / "hctune.db"
    hctune(db, "import", "--format", "text", txt, "-o", tmp_path / "imp.hct", cwd=tmp_path)
    imp = open_trace(tmp_path / "imp.hct")
    assert not imp.header.flags & (spec.FLAG_CLOCK | spec.FLAG_TIME)
    assert _replay(tmp_path / "imp.hct")["mean_rss_weight"] == "ops"


def test_a_load_too_short_for_its_samples_says_so():
    from hctune.validate import short_load_note
    few = [{"curve": [[-0.1, 1], [0.0, 1], [0.1, 2], [0.2, 3]]}] * 3
    many = [{"curve": [[t / 10, 5] for t in range(8)]}] * 3
    assert "close to the server's baseline" in short_load_note(few)
    assert short_load_note(many) is None and short_load_note([]) is None
