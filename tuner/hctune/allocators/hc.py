"""HC as one allocator family: its knobs (configs/knobs.toml, hctune.knobs), compiled into a
library by the build cache (hctune.build, which renders malloc.c with hctune.render)."""

from __future__ import annotations

from typing import Iterable

from hctune import allocators as _lib   # the folder's __init__: Allocator
from hctune import build
from hctune import knobs as _knobs
from hctune.allocators.family import Family


class HC(Family):
    name = "hc"
    compiled = True
    label = "generic HC"

    def knobs(self) -> dict:
        return _knobs.knobs()

    def defaults(self) -> dict:
        return _knobs.defaults()

    def complete(self, partial: dict | None):
        return _knobs.complete(partial or {})

    def parse(self, items: Iterable[str]) -> dict:
        return _knobs.parse_sets(items)

    def key(self, setting: dict | None) -> str | None:
        return None if setting is None else _knobs.key(setting)

    def from_key(self, text: str | None) -> dict:
        return _knobs.complete(_knobs.parse_sets(text.split(",")) if text else {})

    def seeds(self, objective: str) -> list[tuple[str, dict]]:
        """The paper's named settings (configs/presets.toml), generic first, then the rows
        tuned for `objective` (the search's seeds add the §5.2 walk: hctune.search.seeds)."""
        names = [n for n in _knobs.preset_names() if n != "generic"]
        names.sort(key=lambda n: not n.endswith("-" + objective))
        return [(n, _knobs.preset(n)) for n in ["generic", *names]]

    def describe(self, setting: dict | None) -> str:
        changed = self.changed(self.complete(setting))
        return "HC " + (", ".join(f"{k}={v}" for k, v in changed.items()) or "generic")

    def changed(self, setting: dict, base: dict | None = None) -> dict:
        return _knobs.diff_from(setting, _knobs.preset("generic") if base is None else base)

    def prepare(self, setting: dict | None = None, debug: bool = False, db=None):
        full = _knobs.complete(setting) if setting is not None else _knobs.preset("generic")
        return _lib.Allocator("hc", build.build_hc(full, debug=debug, db=db), full)
