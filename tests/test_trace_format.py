"""The trace format: the generated header has not drifted from the spec, the Python writer and
both readers agree, and bad files are refused with one clear line."""

from __future__ import annotations

import random
import struct
import subprocess

import pytest

from hctune import paths
from hctune.errors import HctuneError
from hctune.trace import TraceError, Writer, codegen, open_trace, spec
from hctune.trace.stats import compute, stats

TOOL = paths.BUILD / "hctrace-tool"


def test_header_matches_spec():
    header = codegen.HEADER.read_text()
    assert codegen.splice(header, codegen.block()) == header, \
        "tracer/hctrace.h drifted from configs/trace_format.toml: python -m hctune.trace.codegen"
    assert codegen.main(["--check"]) == 0


def test_codegen_detects_drift():
    s = spec.load()
    s["ops"]["FREE"] = 9
    assert codegen.block(s) != codegen.block()


def _random_events(n=3000, threads=3, seed=1):
    """A consistent multi-threaded event list: (op, thread, ptr, old, size, align)."""
    rng = random.Random(seed)
    live, out, nxt = [], [], 0x7F0000001000
    for _ in range(n):
        t = rng.randrange(threads)
        r = rng.random()
        if live and r < 0.4:
            out.append((spec.FREE, t, live.pop(rng.randrange(len(live))), 0, 0, 0))
        elif live and r < 0.5:
            old = live.pop(rng.randrange(len(live)))
            nxt += rng.choice([16, 48, 4096, 1 << 20]) + rng.choice([0, 8])
            live.append(nxt)
            out.append((spec.REALLOC, t, nxt, old, rng.randrange(1, 5000), 0))
        else:
            op = rng.choice([spec.MALLOC, spec.CALLOC, spec.MEMALIGN])
            nxt += rng.choice([16, 32, 4096, 1 << 22])
            live.append(nxt)
            align = 64 if op == spec.MEMALIGN else 0
            out.append((op, t, nxt, 0, rng.choice([1, 24, 1000, 1025, 70000, 1 << 30]), align))
    return out


def _write(path, events, timed=True):
    with Writer(path, command="prog arg", pid=42, ppid=7, timed=timed) as w:
        for i, (op, t, ptr, old, size, align) in enumerate(events):
            w.event(op, ptr, size, old_ptr=old, align=align, thread=t, time_ns=1000 * i)
    return path


@pytest.mark.parametrize("timed", [True, False])
def test_python_roundtrip_merges_threads(tmp_path, timed):
    events = _random_events()
    t = open_trace(_write(tmp_path / "r.hct", events, timed))
    assert (t.header.command, t.header.pid, t.header.ppid) == ("prog arg", 42, 7)
    got = list(t)
    assert [e.seq for e in got] == list(range(len(events)))
    assert [(e.op, e.thread, e.ptr, e.old_ptr, e.size, e.align) for e in got] == events
    assert [e.time_ns for e in got] == [1000 * i if timed else 0 for i in range(len(events))]
    assert compute(t)["anomalies"] == {"free_unknown": 0, "realloc_unknown": 0, "alloc_live": 0}


def test_c_reader_agrees_with_python(tmp_path):
    events = _random_events(seed=2)
    path = _write(tmp_path / "c.hct", events)
    out = subprocess.run([str(TOOL), "dump", str(path)], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    rows = [line.split() for line in out if not line.startswith("#")]
    name = {v: k for k, v in spec.OP_NAMES.items()}
    assert [(name[r[2]], int(r[1]), int(r[3], 16), int(r[4], 16), int(r[5]), int(r[6]))
            for r in rows] == events
    assert [int(r[0]) for r in rows] == list(range(len(events)))
    assert stats(path, use_tool=True) == stats(path, use_tool=False)


def test_bytes_per_event_is_small(tmp_path):
    events = _random_events(n=20000, threads=1, seed=3)
    path = _write(tmp_path / "s.hct", events, timed=False)
    per = (path.stat().st_size - open_trace(path).header.header_len) / len(events)
    assert per <= 16, per


def _bad_files(tmp_path):
    good = _write(tmp_path / "good.hct", _random_events(n=200, seed=4)).read_bytes()
    version = bytearray(good)
    struct.pack_into("<H", version, spec.H["VERSION_OFFSET"], spec.VERSION + 1)
    return {
        "truncated": (good[:-5], "truncated"),
        "short": (good[:20], "truncated"),
        "magic": (b"GIF89a" + good[6:], "not an hctune trace"),
        "version": (bytes(version), "version"),
        "empty": (b"", "not an hctune trace"),
        "garbage": (good[:spec.H["COMMAND_OFFSET"] + 8] + b"\x00" * 40, "corrupt"),
    }


@pytest.mark.parametrize("case", ["truncated", "short", "magic", "version", "empty", "garbage"])
def test_bad_traces_one_clear_line(tmp_path, case):
    data, words = _bad_files(tmp_path)[case]
    path = tmp_path / f"{case}.hct"
    path.write_bytes(data)
    with pytest.raises(TraceError) as e:
        list(open_trace(path))
    assert words in str(e.value) and "\n" not in str(e.value)
    assert isinstance(e.value, HctuneError)
    r = subprocess.run([str(TOOL), "stats", str(path)], capture_output=True, text=True)
    assert r.returncode == 2 and words in r.stderr and len(r.stderr.strip().splitlines()) == 1
    with pytest.raises(TraceError):
        stats(path)


def test_writer_leaves_nothing_on_error(tmp_path):
    out = tmp_path / "x.hct"
    with pytest.raises(RuntimeError):
        with Writer(out) as w:
            w.malloc(0x1000, 10)
            raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []
