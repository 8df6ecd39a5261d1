"""The allocators configured through their environment as one family: glibc (GLIBC_TUNABLES),
jemalloc (MALLOC_CONF), mimalloc and tcmalloc (their variables), each declared in
configs/allocators.toml (hctune.allocator_knobs), each a library found on the system (glibc:
none to preload)."""

from __future__ import annotations

from typing import Iterable

from hctune import allocator_knobs as _xknobs
from hctune import allocators as _lib   # the folder's __init__: find_system (tests replace it)
from hctune import knobs as _knobs
from hctune.allocators.family import Family
from hctune.errors import HctuneError


class Environ(Family):
    compiled = False

    def __init__(self, name: str):
        self.name = name
        self.label = name

    def knobs(self) -> dict:
        return _xknobs.knobs(self.name)

    def defaults(self) -> dict:
        return _xknobs.defaults(self.name)

    def complete(self, partial: dict | None):
        return _xknobs.complete(self.name, partial)

    def parse(self, items: Iterable[str]) -> dict:
        return _xknobs.parse_sets(self.name, items)

    def key(self, setting: dict | None) -> str | None:
        return None if setting is None else (_xknobs.key(self.name, setting) or None)

    def from_key(self, text: str | None) -> dict:
        return _xknobs.from_key(self.name, text)

    def seeds(self, objective: str) -> list[tuple[str, dict]]:
        return _xknobs.seeds(self.name, objective)

    def describe(self, setting: dict | None) -> str:
        return _xknobs.describe(self.name, setting)

    def changed(self, setting: dict, base: dict | None = None) -> dict:
        return dict(setting)        # its settings are what differs from its defaults

    def prepare(self, setting: dict | None = None, debug: bool = False, db=None,
                footprint: bool = False):
        if setting and set(setting) & set(_knobs.knobs()):
            raise HctuneError(f"HC's knob setting only applies to the hc allocator, "
                              f"not {self.name}")
        library = _lib.find_system(self.name) if self.name in _lib.SYSTEM else None
        full = self.complete(setting)
        return _lib.Allocator(self.name, library, full if setting is not None else None,
                              tuple(_xknobs.env_vars(self.name, full).items()))

    def env_file(self, setting: dict, library=None, generic=None) -> dict:
        library = self.prepare().library
        return {"library": library, "variables": _xknobs.env_vars(self.name, setting),
                "package": _xknobs.allocator(self.name).package if library is not None else None,
                "title": f"{self.describe(setting)}, recommended by hctune"}

    def available(self) -> bool:
        return self.name not in _lib.SYSTEM or self.name in _lib.installed()

    # ---- its search dimensions (hctune.search.space) ----

    def search_knobs(self, only=None, threads: bool = False) -> dict:
        return {n: k for n, k in _xknobs.knobs(self.name).items()
                if k.search != "fixed" and (threads or not k.threads)}

    def search_stem(self, k) -> str:
        return k.full_name

    def search_choices(self, k):
        return k.choices if k.type == "choice" else [0, 1]

    def search_step(self, k) -> int:
        return k.search_step or 1

    def search_where(self, k) -> str:
        return f"allocators.toml: {k.full_name}"

    def search_full(self, setting: dict) -> dict:
        return {**_xknobs.defaults(self.name), **_xknobs.complete(self.name, setting)}

    def search_setting(self, values: dict, only=None, threads: bool = False):
        return _xknobs.complete(self.name, values)
