"""The pure-Python trace reader: header + events in global order.

Meant for small traces, tests and importers; whole-trace statistics on big traces go through
the C reader (build/hctrace-tool, see hctune.trace.stats).  Layout: docs/trace-format.md.
"""

from __future__ import annotations

import heapq
import mmap
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
    if version != spec.VERSION:
        raise TraceError(f"{name}: trace format version {version}, this reader knows version "
                         f"{spec.VERSION}")
    (flags,) = struct.unpack_from("<H", data, H["FLAGS_OFFSET"])
    (hlen,) = struct.unpack_from("<I", data, H["HEADER_LEN_OFFSET"])
    pid, ppid = struct.unpack_from("<II", data, H["PID_OFFSET"])
    (start,) = struct.unpack_from("<Q", data, H["START_TIME_OFFSET"])
    (clen,) = struct.unpack_from("<I", data, H["COMMAND_LEN_OFFSET"])
    if hlen < H["COMMAND_OFFSET"] + clen or hlen > len(data):
        raise TraceError(f"{name}: truncated trace: header of {hlen} bytes, file of {len(data)}")
    command = data[H["COMMAND_OFFSET"]:H["COMMAND_OFFSET"] + clen].decode("utf-8", "replace")
    return Header(version, flags, pid, ppid, start, command, hlen)


def _map(path: Path):
    """The file's bytes, mapped read-only rather than read: opening a trace of gigabytes (to
    index its chunks, count its events) touches only its chunk headers' pages."""
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            return b""
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)


class Trace:
    """An opened trace: `header`, `count` (events), iterate for Events in global order."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        name = str(path)
        try:
            self._data = _map(self.path)
        except IsADirectoryError:
            raise TraceError(f"{name}: is a directory, not a trace") from None
        except OSError as e:
            raise TraceError(f"{name}: {e.strerror}") from None
        self.header = parse_header(self._data, name)
        self._chunks = self._index(name)
        self.count = sum(c.count for c in self._chunks)

    def _index(self, name: str) -> list[_Chunk]:
        data, pos, end = self._data, self.header.header_len, len(self._data)
        timed = bool(self.header.flags & spec.FLAG_TIME)
        chunks = []
        while pos < end:
            at = pos
            if data[pos] != spec.CHUNK_MARKER:
                raise TraceError(f"{name}: corrupt trace: no chunk marker at offset {at}")
            try:
                thread, pos = _varint(data, pos + 1, end)
                first, pos = _varint(data, pos, end)
                count, pos = _varint(data, pos, end)
                plen, pos = _varint(data, pos, end)
                base, pos = _varint(data, pos, end) if timed else (0, pos)
            except IndexError:
                plen = end  # fall through to the truncation message
            if plen > end - pos:
                raise TraceError(f"{name}: truncated trace: chunk at offset {at} runs past the "
                                 f"end of the file ({end} bytes)")
            if count == 0 or count > plen:
                raise TraceError(f"{name}: corrupt trace: bad chunk header at offset {at}")
            chunks.append(_Chunk(at, thread, first, count, pos, pos + plen, base))
            pos += plen
        chunks.sort(key=lambda c: c.first_seq)
        return chunks

    def _decode(self, c: _Chunk) -> Iterator[Event]:
        data, pos, end = self._data, c.start, c.end
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
                yield Event(seq, c.thread, op, ptr, old, size, align, t if timed else 0)
            if pos != end:
                raise IndexError
        except IndexError:
            raise TraceError(f"{self.path}: corrupt trace: bad event in the chunk at offset "
                             f"{c.offset}") from None

    def __iter__(self) -> Iterator[Event]:
        # Chunks are per-thread runs in seq order; merging them restores the global order.
        if len({c.thread for c in self._chunks}) <= 1:
            for c in self._chunks:
                yield from self._decode(c)
        else:
            yield from heapq.merge(*(self._decode(c) for c in self._chunks),
                                   key=lambda e: e.seq)


def open_trace(path: str | Path) -> Trace:
    """Open a trace (raises TraceError with one line for anything that is not a good trace)."""
    return Trace(path)
