"""Placement by lifetime, measured before building it (issue 36; docs/lab/pgo-where.md): over a
trace, a model of generic HC's small pages (allocator/hc/hc_page.c: 64 KiB pages of one class,
a page's free blocks reused last-freed first, the page with free blocks at the head of its
class's list taken first, a page that gets a block back after being full put just after the
head, an empty page retired unless it is the class's current one, retired pages reused by any
class), run to the event where the trace's live bytes peak.  There it reports the pages in use,
the free slots on partly used pages, and how much of that is on pages whose live blocks were
born in different windows of the run (the trace cut into --windows equal parts by events: a
generation of the Lua script spans about one).  Single-threaded traces; requests above 4 KiB
(the paper's heap) are left out.

    PYTHONPATH=tuner .venv/bin/python bench/pgo_lifetime_mix.py TRACE [--windows 16]

A model, not the allocator: it places blocks as hc_page.c does for one thread, without the
empty pool's release (only the layout at the peak is asked).
"""
from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tuner"))
from hctune.trace import fitted                   # noqa: E402

PAGE = 65536
LIMIT = 4096


def events(trace: Path):
    p = subprocess.Popen([str(ROOT / "build/hctrace-tool"), "dump", str(trace)],
                         stdout=subprocess.PIPE, text=True, bufsize=1 << 20)
    for line in p.stdout:
        if line[0] == "#":
            continue
        f = line.split()
        yield int(f[0]), f[2], int(f[3], 16), int(f[4], 16), int(f[5])
    p.wait()


def peak_event(trace: Path) -> tuple[int, int]:
    live, size, best, at, n = 0, {}, -1, 0, 0
    for i, op, ptr, old, sz in events(trace):
        n += 1
        if op == "free":
            live -= size.pop(ptr, 0)
            continue
        if op == "realloc" and old:
            live -= size.pop(old, 0)
        if ptr:
            size[ptr] = sz
            live += sz
        if live > best:
            best, at = live, n
    return at, n


class Page:
    __slots__ = ("cls", "cap", "bump", "free", "live", "births")

    def __init__(self, cls: int):
        self.cls, self.cap, self.bump, self.free, self.live = cls, PAGE // cls, 0, [], 0
        self.births = {}


def simulate(trace: Path, stop: int, total: int, windows: int) -> dict:
    classes = fitted.generic_classes(4, 16, 0, LIMIT)
    avail: dict[int, list[Page]] = {c: [] for c in classes}   # index 0: the current page
    empty: list[Page] = []
    block: dict[int, tuple[Page, int]] = {}                   # trace pointer -> (page, slot)
    req: dict[int, int] = {}
    taken = 0

    def alloc(n: int, birth: int):
        nonlocal taken
        c = fitted._class_of(classes, max(n, 1))
        lst = avail[c]
        if not lst:
            if empty:
                empty.pop()          # an empty page, formatted for this class
            else:
                taken += 1
            lst.append(Page(c))
        pg = lst[0]
        slot = pg.free.pop() if pg.free else pg.bump
        if slot == pg.bump:
            pg.bump += 1
        pg.live += 1
        pg.births[slot] = birth
        if pg.live == pg.cap:
            lst.pop(0)
        return pg, slot

    def free(pg: Page, slot: int):
        lst = avail[pg.cls]
        if pg.live == pg.cap:
            lst.insert(1 if lst else 0, pg)
        pg.live -= 1
        pg.free.append(slot)
        del pg.births[slot]
        if pg.live == 0 and lst[0] is not pg:
            lst.remove(pg)
            empty.append(pg)

    per = max(1, total // windows)
    n = 0
    for i, op, ptr, old, sz in events(trace):
        n += 1
        if n > stop:
            break
        w = n // per
        if op == "free":
            if ptr in block:
                free(*block.pop(ptr))
            req.pop(ptr, None)
            continue
        if op == "realloc" and old:
            if old in block:
                pg, slot = block.pop(old)
                have = pg.cls
                if sz <= have and sz > have // 2 and sz <= LIMIT:
                    block[ptr] = (pg, slot)
                    req[ptr] = sz
                    if old != ptr:
                        req.pop(old, None)
                    continue
                free(pg, slot)
            req.pop(old, None)
        if ptr and sz <= LIMIT:
            block[ptr] = alloc(sz, w)
            req[ptr] = sz
    pages = {id(pg): pg for pg, _ in block.values()}.values()
    out = {"pages_in_use": len(pages), "pages_taken": taken, "empty_pages": len(empty),
           "live_small_bytes": sum(req[p] for p in block), "block_bytes": 0,
           "partly_used_pages": 0, "free_slot_bytes": 0, "mixed_pages": 0,
           "mixed_free_slot_bytes": 0}
    for pg in pages:
        out["block_bytes"] += pg.live * pg.cls
        if pg.live < pg.cap:
            out["partly_used_pages"] += 1
            slack = (pg.bump - pg.live) * pg.cls     # free slots below the bump pointer
            out["free_slot_bytes"] += slack
            if len(set(pg.births.values())) > 1:
                out["mixed_pages"] += 1
                out["mixed_free_slot_bytes"] += slack
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--windows", type=int, default=16)
    args = ap.parse_args()
    stop, total = peak_event(Path(args.trace))
    r = simulate(Path(args.trace), stop, total, args.windows)
    mib = 1 << 20
    print(f"peak at event {stop:,} of {total:,}; windows of {total // args.windows:,} events")
    for k, v in r.items():
        print(f"  {k}: {v:,}" + (f"  ({v / mib:.2f} MiB)" if k.endswith("bytes") else ""))
    print(f"reproduce: PYTHONPATH=tuner .venv/bin/python bench/pgo_lifetime_mix.py {args.trace} "
          f"--windows {args.windows}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
