"""The shared libraries `hctune serve` compiles for its downloads (`emit/libhcmalloc.so`): one
small pool of `slots` threads (`serve --compile-slots`, 1 by default), through the HC build
cache (hctune.build: a setting the search measured on this machine is there already, so its
download compiles nothing). A library being compiled is waited for by every request that asks
for it; a new one asked while every slot is busy is refused (Busy: 429 with Retry-After), so
no number of requests runs more than `slots` compilers. A process killed mid-compile leaves its
temporary directory in the cache, which the next build there removes
(hctune.build.sweep_orphans)."""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from hctune import build

RETRY_SECONDS = 10   # what a refused request is told to wait (a compile takes ~5 s)


class Busy(Exception):
    pass


class Compiles:
    def __init__(self, slots: int = 1):
        self.slots = slots
        self._pool = ThreadPoolExecutor(slots, thread_name_prefix="hctune-compile")
        self._running: dict[Path, Future] = {}
        self._lock = threading.Lock()
        self.started = 0        # compiles started by this process

    def library(self, setting: dict) -> Future:
        """A future of the build cache's library for `setting` (done at once when cached);
        Busy when it would be a new compile and every slot is taken."""
        lib = build.cached_hc(setting)
        with self._lock:
            fut = self._running.get(lib)
            if fut is not None:
                return fut
            if lib.exists():
                fut = Future()
                fut.set_result(lib)
                return fut
            if len(self._running) >= self.slots:
                raise Busy(f"{len(self._running)} shared librar"
                           f"{'y is' if len(self._running) == 1 else 'ies are'} being compiled; "
                           f"ask again in {RETRY_SECONDS} s")
            self.started += 1
            fut = self._running[lib] = self._pool.submit(build.build_hc, setting)
        fut.add_done_callback(lambda _: self._done(lib))
        return fut

    def _done(self, lib: Path) -> None:
        with self._lock:
            self._running.pop(lib, None)
