"""HC as one allocator family: its knobs (configs/knobs.toml, hctune.knobs), compiled into a
library by the build cache (hctune.build, which renders malloc.c with hctune.render)."""

from __future__ import annotations

from typing import Iterable

from hctune import allocators as _lib   # the folder's __init__: Allocator
from hctune import build
from hctune import knobs as _knobs
from hctune.allocators.family import Family
from hctune.errors import HctuneError

# Knobs whose search kind is "fixed" keep this value during a search when the paper gives one:
# MONITOR is "usually turned off unless statistics are to be collected" (Hasan & Chang 2006,
# §5.2, and every Table 7 row), so the builds measured are the builds emitted.
FIXED_IN_SEARCH = {"MONITOR": 0}

# §5.2: "turn off SPLIT and all coalescing parameters and start with a high value for QL_HIGH".
GUIDELINE_QL_HIGH_START = 512
# §5.2: "Further reduction in memory consumption can be attempted by decreasing QL_HIGH".
GUIDELINE_QL_HIGH_LOWER = (256, 128, 64)
# §5.2 names SPLIT first, then "other coalescing parameters", in the order of §3.7, §3.8, §3.11.
GUIDELINE_ORDER = ("SPLIT", "COALESCE", "COALESCE_QL", "COALESCE_IN_FREE")


def guideline() -> list[tuple[str, dict]]:
    """The §5.2 walk from pure segregated storage towards least memory, as (label, the knobs
    it sets; the rest at their defaults)."""
    step = {name: 0 for name in GUIDELINE_ORDER}
    step["QL_HIGH"] = GUIDELINE_QL_HIGH_START
    out = [("§5.2 pure segregated storage", dict(step))]
    for name in GUIDELINE_ORDER:
        step[name] = 1
        out.append((f"§5.2 +{name}", dict(step)))
    for ql in GUIDELINE_QL_HIGH_LOWER:
        step["QL_HIGH"] = ql
        out.append((f"§5.2 QL_HIGH={ql}", dict(step)))
    return out


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

    def describe(self, setting: dict | None) -> str:
        changed = self.changed(self.complete(setting))
        return "HC " + (", ".join(f"{k}={v}" for k, v in changed.items()) or "generic")

    def changed(self, setting: dict, base: dict | None = None) -> dict:
        return _knobs.diff_from(setting, _knobs.preset("generic") if base is None else base)

    def prepare(self, setting: dict | None = None, debug: bool = False, db=None,
                footprint: bool = False):
        full = _knobs.complete(setting) if setting is not None else _knobs.preset("generic")
        return _lib.Allocator("hc", build.build_hc(full, debug=debug, db=db, footprint=footprint),
                              full)

    # ---- how the rest of hctune treats HC (hctune.allocators.family says each) ----
    fits_tables = True          # size classes fitted to a trace (hctune.search.fitted)
    validates_top = True        # validation runs the study's best K settings (tuned #1..K)
    tag = "HC"
    defaults_seed = None        # HC as it comes is the generic seed
    default_label = "the generic setting"
    emit_command = "hctune emit -o malloc.c"
    no_setting_text = "(generic)"

    def env_file(self, setting: dict, library=None, generic=None) -> dict:
        if library is None:
            raise HctuneError("an HC recommendation needs its .so beside the file")
        # a generic answer was not tuned: say which setting it is (Table 6's, as the paper
        # gives it, or the generic HC the search measured: its fixed knobs held)
        full = _knobs.complete(setting)
        changed = _knobs.diff_from(full, _knobs.preset("generic"))
        title = ("HC, tuned by hctune (Hasan & Chang 2006, §3)"
                 if full not in (_knobs.preset("generic"), generic())
                 else "HC's generic setting (Hasan & Chang 2006, Table 6)"
                 + (" as the search measures it ("
                    + ", ".join(f"{k}={v}" for k, v in changed.items()) + ")" if changed
                    else "")
                 + ", recommended by hctune")
        return {"library": library, "variables": {}, "package": None, "title": title}

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

    # ---- its seeds and its search dimensions (hctune.search asks every family the same) ----
    long_walk = True            # generic, then the §5.2 walk and Table 7: after the others' few
    search_strict = True        # a trial without one of its parameters: a study of other knobs

    def seeds(self, objective: str) -> list[tuple[str, dict]]:
        """What the paper would try by hand, in this order (the search measures each as it
        would be emitted, duplicates dropped: hctune.search.seeds): generic (Table 6, the
        reference every result is compared to); the §5.2 guideline, from pure segregated
        storage (SPLIT and every coalescing knob off, QL_HIGH high, "512 or higher but less than
        1024") turning SPLIT and the coalescing knobs on one by one, then lowering QL_HIGH; then
        the Table 7 rows, those tuned for `objective` first. Knobs the paper does not name keep
        their defaults (the paper's §3.8-§3.11 numbers)."""
        names = [n for n in _knobs.preset_names() if n != "generic"]
        names.sort(key=lambda n: not n.endswith("-" + objective))   # stable: file order kept
        return [("generic", _knobs.preset("generic")), *guideline(),
                *[(n, _knobs.preset(n)) for n in names]]

    def search_knobs(self, only=None, threads: bool = False) -> dict:
        table = {n: k for n, k in _knobs.knobs().items()
                 if k.search != "fixed" and (threads or not k.threads)}
        if only is None:
            return table
        gated = [n for n in only if n not in table and n in _knobs.knobs() and
                 _knobs.knobs()[n].threads and _knobs.knobs()[n].search != "fixed"]
        if gated:
            raise HctuneError(f"{', '.join(gated)}: searched only when a trace of the study is "
                              f"multi-threaded (the thread cache is never used on one thread)")
        unknown = [n for n in only if n not in table]
        if unknown:
            raise HctuneError(f"not searchable knobs: {', '.join(unknown)}; searchable: "
                              f"{', '.join(table)}")
        return {n: k for n, k in table.items() if n in only}

    def search_fixed(self, only=None, threads: bool = False) -> dict:
        """The values the knobs that are not searched keep during a search."""
        out = {}
        varied = self.search_knobs(only, threads)
        for name, k in _knobs.knobs().items():
            if name not in varied:
                value = FIXED_IN_SEARCH.get(name, k.default)
                if not threads and k.single_thread_value is not None:
                    value = k.single_thread_value
                out[name] = k.check(value)
        return out

    def search_stem(self, k) -> str:
        return k.name

    def search_choices(self, k):
        return [0, 1] if k.type == "bool" else None

    def search_step(self, k) -> int:
        return k.search_step or k.step or 1

    def search_where(self, k) -> str:
        return f"knobs.toml: {k.name}"

    def search_full(self, setting: dict) -> dict:
        return _knobs.complete(setting)

    def search_setting(self, values: dict, only=None, threads: bool = False):
        return _knobs.complete({**self.search_fixed(only, threads), **values})

    def as_searched(self, setting: dict) -> dict:
        out = _knobs.complete(setting).copy()     # (a completed setting may be the caller's)
        out.update(self.search_fixed())
        return out

    def seedable(self, setting: dict, searched) -> bool:
        return True                 # a whole setting: the knobs not searched hold their value
