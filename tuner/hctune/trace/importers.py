"""Turn existing allocation traces into hctune traces.

text: the format of the Hummingbird / GNU Emacs trace study (the trace-driven comparison of nine
mallocs, §4): one call per line,
    Allocate <tag> <size>        Free <tag>        Realloc <old-tag> <new-tag> <size>
and the short forms  a <tag> <size>,  f <tag>,  r <old-tag> <new-tag> <size>.  A tag is any
word naming a live object (the study used addresses); blank lines and '#' comments are skipped.

mtrace: what glibc's mtrace() writes to $MALLOC_TRACE,
    @ prog:[0xcaller] + 0xADDR 0xSIZE      allocation
    @ prog:[0xcaller] - 0xADDR             free
    @ prog:[0xcaller] < 0xOLD  then  @ prog:[0xcaller] > 0xNEW 0xSIZE    realloc
('@ caller' is optional; '= Start' / '= End' lines are skipped).

Tags become addresses of a synthetic heap (16-byte spaced), so the replay side sees ordinary
pointers.  A malformed line is a one-line error naming file and line; nothing is written then.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterator

from hctune.errors import HctuneError
from hctune.trace.writer import Writer

FORMATS = ("text", "mtrace")
_BASE = 0x10000000


class _Heap:
    """Map tags to distinct synthetic addresses (a tag reused after its free is a new object)."""

    def __init__(self):
        self.live: dict[str, int] = {}
        self.next = _BASE

    def new(self, tag: str, size: int) -> int:
        addr = self.next
        self.next += max(16, (size + 15) & ~15)
        self.live[tag] = addr
        return addr

    def drop(self, tag: str) -> int:
        # an unknown tag gets an address nobody holds: readers count it as an anomaly
        addr = self.live.pop(tag, None)
        if addr is None:
            addr = self.next
            self.next += 16
        return addr


def _lines(path: Path) -> Iterator[tuple[int, list[str]]]:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for no, line in enumerate(f, 1):
                words = line.split()
                if words and not words[0].startswith("#"):
                    yield no, words
    except OSError as e:
        raise HctuneError(f"cannot read {path}: {e.strerror}") from None


def _int(word: str, base: int, where: str) -> int:
    try:
        v = int(word, base)
    except ValueError:
        raise HctuneError(f"{where}: not a number: {word!r}") from None
    if v < 0:
        raise HctuneError(f"{where}: negative size {word!r}")
    return v


def _text_events(path: Path, w: Writer) -> None:
    heap = _Heap()
    for no, words in _lines(path):
        where = f"{path}:{no}"
        op = words[0].lower()
        if op in ("allocate", "a", "malloc") and len(words) == 3:
            size = _int(words[2], 0, where)
            w.malloc(heap.new(words[1], size), size)
        elif op in ("free", "f") and len(words) == 2:
            w.free(heap.drop(words[1]))
        elif op in ("realloc", "reallocate", "r") and len(words) == 4:
            size = _int(words[3], 0, where)
            old = heap.drop(words[1])
            w.realloc(old, heap.new(words[2], size), size)
        else:
            raise HctuneError(f"{where}: not a text-trace line (Allocate <tag> <size>, "
                              f"Free <tag>, Realloc <old> <new> <size>): {' '.join(words)[:60]!r}")


def _mtrace_events(path: Path, w: Writer) -> None:
    heap = _Heap()
    pending_old: tuple[str, int] | None = None     # the '<' half of a realloc
    for no, words in _lines(path):
        where = f"{path}:{no}"
        if words[0] == "=":
            continue
        if words[0] == "@":
            words = words[2:]
        if not words:
            raise HctuneError(f"{where}: not an mtrace line")
        op = words[0]
        if pending_old is not None and op != ">":
            raise HctuneError(f"{where}: realloc '<' line at line {pending_old[1]} has no '>'")
        if op == "+" and len(words) == 3:
            _int(words[1], 16, where)
            size = _int(words[2], 16, where)
            w.malloc(heap.new(words[1].lower(), size), size)
        elif op == "-" and len(words) == 2:
            _int(words[1], 16, where)
            w.free(heap.drop(words[1].lower()))
        elif op == "<" and len(words) == 2:
            _int(words[1], 16, where)
            pending_old = (words[1].lower(), no)
        elif op == ">" and len(words) == 3 and pending_old is not None:
            _int(words[1], 16, where)
            size = _int(words[2], 16, where)
            old = heap.drop(pending_old[0])
            w.realloc(old, heap.new(words[1].lower(), size), size)
            pending_old = None
        else:
            raise HctuneError(f"{where}: not an mtrace line ('+ 0xADDR 0xSIZE', '- 0xADDR', "
                              f"'< 0xOLD', '> 0xNEW 0xSIZE'): {' '.join(words)[:60]!r}")
    if pending_old is not None:
        raise HctuneError(f"{path}:{pending_old[1]}: realloc '<' line has no '>'")


_PARSERS: dict[str, Callable[[Path, Writer], None]] = {"text": _text_events,
                                                       "mtrace": _mtrace_events}


def import_trace(src: str | Path, fmt: str, out: str | Path) -> Path:
    """Convert src (format `fmt`) into the hctune trace `out`; returns out.  Atomic."""
    src, out = Path(src), Path(out)
    if fmt not in _PARSERS:
        raise HctuneError(f"unknown import format {fmt!r} (known: {', '.join(FORMATS)})")
    if not src.is_file():
        raise HctuneError(f"{src}: no such file")
    if out.resolve() == src.resolve():
        raise HctuneError("the output would overwrite the input")
    out.parent.mkdir(parents=True, exist_ok=True)
    with Writer(out, command=f"import:{fmt} {src.name}") as w:
        _PARSERS[fmt](src, w)
        if w.events == 0:
            raise HctuneError(f"{src}: no allocation events found")
    return out
