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

    # ---- how the rest of hctune treats HC (hctune.allocators.family says each) ----
    fits_tables = True          # size classes fitted to a trace (hctune.search.fitted)
    validates_top = True        # validation runs the study's best K settings (tuned #1..K)
    tag = "HC"
    defaults_seed = None        # HC as it comes is the generic seed
    default_label = "the generic setting"
    emit_command = "hctune emit -o malloc.c"
    no_setting_text = "(generic)"

    def as_run(self, setting: dict | None) -> tuple[str, dict | None]:
        return (f"{self.name}:generic" if setting is None else self.name), setting

    def best_line(self, setting: dict | None, changed: str) -> str:
        return f"changed from generic (Table 6): {changed}"

    def is_defaults(self, setting) -> bool:
        return False            # every stored HC setting is whole, generic included

    def available(self) -> bool:
        return True             # built from this tree (hctune.build)

    def trial_label(self, setting, who: str) -> str:
        return who

    def answer_name(self, candidate: str) -> str:
        return f"{candidate} (HC)"

    def headline(self, changed: str) -> str:
        return "HC; changed from generic: " + changed

    def changed_text(self, setting: dict, base: dict | None = None) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.changed(setting, base).items()) or "nothing"

    def knob_changes(self, setting: dict, generic: dict) -> tuple[dict, dict]:
        return _knobs.diff_from(_knobs.complete(setting), generic), generic

    def short_key(self, key: str, generic) -> str:
        given = _knobs.parse_sets(key.split(","))
        return ",".join(f"{k}={v}" for k, v in _knobs.diff_from(given, generic()).items()) \
            or "generic"

    def setting_text(self, pairs: dict, generic) -> str:
        base = dict(p.split("=", 1) for p in _knobs.key(generic()).split(","))
        pairs = {k: v for k, v in pairs.items() if base.get(k) != v}
        return ", ".join(f"{k}={v}" for k, v in pairs.items()) if pairs else "(generic)"
