"""One interface for every allocator hctune tunes: a `Family` says what knobs it has, how a
setting is completed, parsed from `--set`, written as one line (its key) and read back, which
settings to try first, how a user reads it, and how to prepare it for a run (a library to
preload and the environment that carries the setting). HC is one family (its knobs are compiled
in: hctune.allocators.hc), the allocators configured through their environment (glibc's
tunables, jemalloc's MALLOC_CONF, mimalloc's and tcmalloc's variables) another
(hctune.allocators.environ); hctune.allocators.registry names them. Code above asks the
registry for a family instead of testing `name == "hc"`.
"""

from __future__ import annotations

from typing import Iterable


class Family:
    """What every allocator family provides (the methods raise until a family says them)."""

    name: str = ""
    compiled: bool = False          # its setting is compiled into a library (HC): malloc.c
    label: str = ""                 # how a verdict names its built-in answer ("generic HC")

    def knobs(self) -> dict:
        """{knob name: its declaration}, in the order of its configs/ file."""
        raise NotImplementedError

    def defaults(self) -> dict:
        """The setting every knob's default makes."""
        raise NotImplementedError

    def complete(self, partial: dict | None):
        """`partial` checked and completed once (a hctune.setting.Setting)."""
        raise NotImplementedError

    def parse(self, items: Iterable[str]) -> dict:
        """`--set` items (KNOB=VALUE) -> the setting they name, each value checked."""
        raise NotImplementedError

    def key(self, setting: dict | None) -> str | None:
        """The setting's canonical one-line form (database rows, cache keys); None for no
        setting (and another allocator's defaults, which share rows with plain runs)."""
        raise NotImplementedError

    def from_key(self, text: str | None) -> dict:
        """The setting of a `key` line."""
        raise NotImplementedError

    def seeds(self, objective: str) -> list[tuple[str, dict]]:
        """(label, setting) of the settings declared to try first for `objective`."""
        raise NotImplementedError

    def describe(self, setting: dict | None) -> str:
        """How a user reads the setting."""
        raise NotImplementedError

    def changed(self, setting: dict, base: dict | None = None) -> dict:
        """What the setting changes from `base` (HC: from generic; another allocator: from its
        library's defaults, which its settings already are)."""
        raise NotImplementedError

    def prepare(self, setting: dict | None = None, debug: bool = False, db=None):
        """The hctune.allocators.Allocator that runs `setting`: a library and an environment."""
        raise NotImplementedError
