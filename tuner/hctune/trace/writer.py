"""Write traces in the hctune format (importers use it; the C tracers have their own encoder
in tracer/hctrace_enc.h).  Atomic: events go to a temp file next to the target, renamed into
place only when the writer closes without error, so a failed import leaves nothing behind."""

from __future__ import annotations

import os
import struct
import time
from pathlib import Path

from hctune.trace import spec
from hctune.trace.reader import TraceError

_CHUNK_BYTES = 64 * 1024
_MASK64 = 0xFFFFFFFFFFFFFFFF


def _varint(v: int, out: bytearray) -> None:
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def _zigzag(v: int) -> int:
    # the C writer's 64-bit wrapping difference, as a signed number
    v &= _MASK64
    if v >= 1 << 63:
        v -= 1 << 64
    return ((v << 1) ^ (v >> 63)) & _MASK64


def header_bytes(command: str, pid: int, ppid: int, start_time_ns: int, flags: int) -> bytes:
    H = spec.H
    cmd = command.encode("utf-8")
    buf = bytearray(H["COMMAND_OFFSET"])
    buf[H["MAGIC_OFFSET"]:H["MAGIC_OFFSET"] + len(spec.MAGIC)] = spec.MAGIC
    struct.pack_into("<H", buf, H["VERSION_OFFSET"], spec.VERSION)
    struct.pack_into("<H", buf, H["FLAGS_OFFSET"], flags)
    struct.pack_into("<I", buf, H["HEADER_LEN_OFFSET"], H["COMMAND_OFFSET"] + len(cmd))
    struct.pack_into("<II", buf, H["PID_OFFSET"], pid, ppid)
    struct.pack_into("<Q", buf, H["START_TIME_OFFSET"], start_time_ns)
    struct.pack_into("<I", buf, H["COMMAND_LEN_OFFSET"], len(cmd))
    return bytes(buf) + cmd


class _Chunk:
    def __init__(self, thread: int):
        self.thread = thread
        self.payload = bytearray()
        self.count = 0
        self.first_seq = self.prev_seq = self.prev_ptr = self.base_time = self.prev_time = 0


class Writer:
    """with Writer(path, command=...) as w: w.malloc(ptr, size); w.free(ptr); ...

    Sequence numbers are given in call order, so events are written in global order."""

    def __init__(self, path: str | os.PathLike, command: str = "", pid: int = 0, ppid: int = 0,
                 start_time_ns: int | None = None, timed: bool = False, clock: bool = False):
        """timed: every event's time_ns written (flags.TIME); clock: the trace's coarse clock
        (flags.CLOCK), each chunk carrying its first event's time_ns and spanning less than
        spec.CLOCK_QUANTUM_NS, as the tracer writes it; neither: no time at all."""
        self.path = Path(path)
        self.flags = spec.FLAG_TIME if timed else spec.FLAG_CLOCK if clock else 0
        self.events = 0
        self._seq = 0
        self._chunks: dict[int, _Chunk] = {}
        self._tmp = self.path.with_name(f".{self.path.name}.tmp-{os.getpid()}")
        try:
            self._f = open(self._tmp, "wb")
        except OSError as e:
            raise TraceError(f"cannot write {self.path}: {e.strerror}") from None
        self._f.write(header_bytes(command, pid, ppid,
                                   time.time_ns() if start_time_ns is None else start_time_ns,
                                   self.flags))

    # ---- events ----

    def event(self, op: int, ptr: int, size: int = 0, old_ptr: int = 0, align: int = 0,
              thread: int = 0, time_ns: int = 0) -> None:
        c = self._chunks.get(thread)
        if c is None:
            c = self._chunks[thread] = _Chunk(thread)
        if (self.flags & spec.FLAG_CLOCK and c.count
                and time_ns - c.base_time >= spec.CLOCK_QUANTUM_NS):
            self._flush(c)
        seq = self._seq
        self._seq += 1
        if c.count == 0:
            c.first_seq, c.prev_seq = seq, seq - 1
            c.base_time = c.prev_time = time_ns
            c.prev_ptr = 0
        out = c.payload
        dseq = seq - c.prev_seq - 1
        d = (ptr - c.prev_ptr) & _MASK64
        tag = op
        if d & ((1 << spec.PTR_GRANULE_SHIFT) - 1) == 0:
            tag |= spec.GRANULE_BIT
            d = (d - (1 << 64) if d >= 1 << 63 else d) >> spec.PTR_GRANULE_SHIFT
        if dseq < spec.SEQ_ESCAPE:
            out.append(tag | dseq << spec.SEQ_SHIFT)
        else:
            out.append(tag | spec.SEQ_ESCAPE << spec.SEQ_SHIFT)
            _varint(dseq - spec.SEQ_ESCAPE, out)
        _varint(_zigzag(d), out)
        if op != spec.FREE:
            _varint(size, out)
        if op == spec.REALLOC:
            _varint(_zigzag(old_ptr - ptr), out)
        if op == spec.MEMALIGN:
            _varint(align, out)
        if self.flags & spec.FLAG_TIME:
            _varint(time_ns - c.prev_time, out)
            c.prev_time = time_ns
        c.prev_seq, c.prev_ptr = seq, ptr
        c.count += 1
        self.events += 1
        if len(out) >= _CHUNK_BYTES:
            self._flush(c)

    def malloc(self, ptr, size, **kw):
        self.event(spec.MALLOC, ptr, size, **kw)

    def calloc(self, ptr, size, **kw):
        self.event(spec.CALLOC, ptr, size, **kw)

    def realloc(self, old_ptr, ptr, size, **kw):
        self.event(spec.REALLOC, ptr, size, old_ptr=old_ptr, **kw)

    def free(self, ptr, **kw):
        self.event(spec.FREE, ptr, **kw)

    def memalign(self, ptr, size, align, **kw):
        self.event(spec.MEMALIGN, ptr, size, align=align, **kw)

    # ---- output ----

    def _flush(self, c: _Chunk) -> None:
        if not c.count:
            return
        head = bytearray([spec.CHUNK_MARKER])
        for v in (c.thread, c.first_seq, c.count, len(c.payload)):
            _varint(v, head)
        if self.flags & (spec.FLAG_TIME | spec.FLAG_CLOCK):
            _varint(c.base_time, head)
        self._f.write(head)
        self._f.write(c.payload)
        c.payload = bytearray()
        c.count = 0

    def close(self) -> Path:
        """Finish the file and move it into place; returns its path."""
        for c in self._chunks.values():
            self._flush(c)
        self._f.close()
        os.replace(self._tmp, self.path)
        return self.path

    def abort(self) -> None:
        """Drop everything written: nothing half-written is left behind."""
        self._f.close()
        self._tmp.unlink(missing_ok=True)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.close()
        else:
            self.abort()


def tile(src: str | os.PathLike, dst: str | os.PathLike, times: int) -> Path:
    """Write dst: the events of the untimed trace src, `times` over, one copy after the other
    (each copy's chunks with their seq shifted past the previous copy's, and with the clock,
    their base times past the previous copy's).  A big trace at disk
    speed, for tests and benchmarks of traces larger than memory: src should free what it
    allocates, or each copy after the first allocates at live addresses."""
    data = Path(src).read_bytes()
    hlen = struct.unpack_from("<I", data, spec.H["HEADER_LEN_OFFSET"])[0]
    flags = struct.unpack_from("<H", data, spec.H["FLAGS_OFFSET"])[0]
    if flags & spec.FLAG_TIME:
        raise TraceError(f"{src}: tile needs an untimed trace")
    clock = bool(flags & spec.FLAG_CLOCK)
    chunks = []                      # (thread, first_seq, count, payload, base_time)
    pos, last, span = hlen, 0, 0
    while pos < len(data):
        pos += 1                     # the chunk marker
        fields = []
        for _ in range(5 if clock else 4):
            v = shift = 0
            while True:
                b = data[pos]
                pos += 1
                v |= (b & 0x7F) << shift
                shift += 7
                if not b & 0x80:
                    break
            fields.append(v)
        thread, first, count, plen = fields[:4]
        base = fields[4] if clock else 0
        chunks.append((thread, first, count, data[pos:pos + plen], base))
        last = max(last, first + count)
        span = max(span, base + spec.CLOCK_QUANTUM_NS)
        pos += plen
    tmp = Path(dst).with_name(f".{Path(dst).name}.tmp-{os.getpid()}")
    with open(tmp, "wb") as f:
        f.write(data[:hlen])
        for k in range(times):
            for thread, first, count, payload, base in chunks:
                head = bytearray([spec.CHUNK_MARKER])
                for v in (thread, first + k * last, count, len(payload)):
                    _varint(v, head)
                if clock:
                    _varint(base + k * span, head)
                f.write(head)
                f.write(payload)
    os.replace(tmp, dst)
    return Path(dst)
