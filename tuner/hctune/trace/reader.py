"""The pure-Python trace reader: header + events in global order.

Meant for small traces, tests and importers; whole-trace statistics on big traces go through
the C reader (build/hctrace-tool, see hctune.trace.stats).  Opening a trace reads its header and
chunk headers only (os.pread), so registering a trace of gigabytes costs megabytes; iterating
reads a chunk's payload when the merge reaches it.  Layout: docs/trace-format.md.
"""

from __future__ import annotations

import heapq
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, NamedTuple

from hctune.errors import HctuneError
from hctune.trace import spec


class TraceError(HctuneError):
    """A file that is not a readable hctune trace (wrong magic, version, truncated, corrupt)."""


class Event(NamedTuple):
    seq: int
    thread: int
    op: int          # spec.MALLOC ... spec.MEMALIGN
    ptr: int         # the result, or the freed pointer
    old_ptr: int     # realloc's argument
    size: int        # bytes asked (calloc: nmemb * size)
    align: int       # memalign family
    time_ns: int     # since the trace started; 0 when not recorded


@dataclass(frozen=True)
class Header:
    version: int
    flags: int
    pid: int
    ppid: int
    start_time_ns: int
    command: str
    header_len: int


@dataclass(frozen=True)
class _Chunk:
    offset: int        # of the chunk marker, for messages
    thread: int
    first_seq: int
    count: int
    start: int         # payload
    end: int
    base_time: int


def _varint(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    value = shift = 0
    while pos < end and shift < 70:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7
    raise IndexError


def _unzigzag(z: int) -> int:
    return (z >> 1) ^ -(z & 1)


def parse_header(data: bytes, name: str) -> Header:
    H = spec.H
    if len(data) < H["COMMAND_OFFSET"]:
        if data and spec.MAGIC.startswith(data[:len(spec.MAGIC)]):
            raise TraceError(f"{name}: truncated trace: {len(data)} bytes, shorter than the header")
        raise TraceError(f"{name}: not an hctune trace (too short: {len(data)} bytes)")
    if data[H["MAGIC_OFFSET"]:H["MAGIC_OFFSET"] + len(spec.MAGIC)] != spec.MAGIC:
        raise TraceError(f"{name}: not an hctune trace (wrong magic bytes)")
    (version,) = struct.unpack_from("<H", data, H["VERSION_OFFSET"])
    if not spec.MIN_VERSION <= version <= spec.VERSION:
        raise TraceError(f"{name}: trace format version {version}, this reader knows versions "
                         f"{spec.MIN_VERSION} to {spec.VERSION}")
    (flags,) = struct.unpack_from("<H", data, H["FLAGS_OFFSET"])
    (hlen,) = struct.unpack_from("<I", data, H["HEADER_LEN_OFFSET"])
    pid, ppid = struct.unpack_from("<II", data, H["PID_OFFSET"])
    (start,) = struct.unpack_from("<Q", data, H["START_TIME_OFFSET"])
    (clen,) = struct.unpack_from("<I", data, H["COMMAND_LEN_OFFSET"])
    if hlen < H["COMMAND_OFFSET"] + clen or hlen > len(data):
        raise TraceError(f"{name}: truncated trace: header of {hlen} bytes, file of {len(data)}")
    command = data[H["COMMAND_OFFSET"]:H["COMMAND_OFFSET"] + clen].decode("utf-8", "replace")
    return Header(version, flags, pid, ppid, start, command, hlen)


_HEAD = 1 << 20     # the file's first bytes read at open: the header, and small traces whole


class Trace:
    """An opened trace: `header`, `count` (events), iterate for Events in global order."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        name = str(path)
        try:
            with open(self.path, "rb") as f:
                self._size = os.fstat(f.fileno()).st_size
                head = f.read(_HEAD)
        except IsADirectoryError:
            raise TraceError(f"{name}: is a directory, not a trace") from None
        except OSError as e:
            raise TraceError(f"{name}: {e.strerror}") from None
        self._head = head
        self.header = parse_header(head, name)
        self._chunks = self._index(name)
        self.count = sum(c.count for c in self._chunks)

    def _read(self, pos: int, n: int) -> bytes:
        """n bytes at pos (fewer at the end of the file)."""
        if pos + n <= len(self._head):
            return self._head[pos:pos + n]
        with open(self.path, "rb") as f:
            return os.pread(f.fileno(), n, pos)

    def _index(self, name: str) -> list[_Chunk]:
        pos, end = self.header.header_len, self._size
        timed = bool(self.header.flags & (spec.FLAG_TIME | spec.FLAG_CLOCK))   # a base time
        chunks = []
        f = open(self.path, "rb") if end > len(self._head) else None
        try:
            while pos < end:
                at = pos
                if at + spec.CHUNK_HEADER_MAX <= len(self._head) or f is None:
                    data, base_at = self._head, 0
                else:
                    data, base_at = os.pread(f.fileno(), spec.CHUNK_HEADER_MAX, at), at
                p, stop = at - base_at, len(data)
                if data[p] != spec.CHUNK_MARKER:
                    raise TraceError(f"{name}: corrupt trace: no chunk marker at offset {at}")
                try:
                    thread, p = _varint(data, p + 1, stop)
                    first, p = _varint(data, p, stop)
                    count, p = _varint(data, p, stop)
                    plen, p = _varint(data, p, stop)
                    base, p = _varint(data, p, stop) if timed else (0, p)
                except IndexError:
                    plen = end  # fall through to the truncation message
                pos = base_at + p
                if plen > end - pos:
                    raise TraceError(f"{name}: truncated trace: chunk at offset {at} runs past "
                                     f"the end of the file ({end} bytes)")
                if count == 0 or count > plen:
                    raise TraceError(f"{name}: corrupt trace: bad chunk header at offset {at}")
                chunks.append(_Chunk(at, thread, first, count, pos, pos + plen, base))
                pos += plen
        finally:
            if f is not None:
                f.close()
        chunks.sort(key=lambda c: c.first_seq)
        return chunks

    def _decode(self, c: _Chunk) -> Iterator[Event]:
        data = self._read(c.start, c.end - c.start)
        pos, end = 0, len(data)
        timed = bool(self.header.flags & spec.FLAG_TIME)
        seq, ptr, t = c.first_seq - 1, 0, c.base_time
        try:
            for _ in range(c.count):
                tag = data[pos]
                pos += 1
                op = tag & spec.OP_MASK
                if not spec.MALLOC <= op <= spec.MEMALIGN:
                    raise IndexError
                dseq = tag >> spec.SEQ_SHIFT
                if dseq == spec.SEQ_ESCAPE:
                    v, pos = _varint(data, pos, end)
                    dseq += v
                seq += 1 + dseq
                z, pos = _varint(data, pos, end)
                d = _unzigzag(z)
                if tag & spec.GRANULE_BIT:
                    d <<= spec.PTR_GRANULE_SHIFT
                ptr = (ptr + d) & 0xFFFFFFFFFFFFFFFF
                size = old = align = 0
                if op != spec.FREE:
                    size, pos = _varint(data, pos, end)
                if op == spec.REALLOC:
                    z, pos = _varint(data, pos, end)
                    old = (ptr + _unzigzag(z)) & 0xFFFFFFFFFFFFFFFF
                if op == spec.MEMALIGN:
                    align, pos = _varint(data, pos, end)
                if timed:
                    dt, pos = _varint(data, pos, end)
                    t += dt
                yield Event(seq, c.thread, op, ptr, old, size, align, t)
            if pos != end:
                raise IndexError
        except IndexError:
            raise TraceError(f"{self.path}: corrupt trace: bad event in the chunk at offset "
                             f"{c.offset}") from None

    def __iter__(self) -> Iterator[Event]:
        # Chunks are per-thread runs in seq order; merging them restores the global order.  A
        # chunk joins the merge when its first event is the next one due, as in the C reader,
        # so only the chunks being merged are in memory.
        if len({c.thread for c in self._chunks}) <= 1:
            for c in self._chunks:
                yield from self._decode(c)
            return
        heap: list = []
        pending = iter(self._chunks)
        nxt = next(pending, None)
        k = 0
        while heap or nxt is not None:
            while nxt is not None and (not heap or nxt.first_seq <= heap[0][0]):
                it = self._decode(nxt)
                e = next(it, None)
                if e is not None:
                    heapq.heappush(heap, (e.seq, k, e, it))
                    k += 1
                nxt = next(pending, None)
            _, _, e, it = heap[0]
            yield e
            e2 = next(it, None)
            if e2 is None:
                heapq.heappop(heap)
            else:
                heapq.heapreplace(heap, (e2.seq, k, e2, it))
                k += 1


def open_trace(path: str | Path) -> Trace:
    """Open a trace (raises TraceError with one line for anything that is not a good trace)."""
    return Trace(path)
