"""The first trials of every study: what the paper would try by hand.

Order matters when the budget is small, so the seeds come as:
1. the generic setting (Hasan & Chang 2006, Table 6) — the reference every result is compared to;
2. the §5.2 guideline: start near pure segregated storage (SPLIT and every coalescing knob off,
   QL_HIGH high, "512 or higher but less than 1024"), turn SPLIT and the coalescing knobs on one
   by one, then lower QL_HIGH;
3. the Table 7 rows, those tuned for this study's objective first.
Knobs the paper does not name keep their defaults (the paper's §3.8-§3.11 numbers); knobs that
are not searched (MONITOR) take their search value, so a seed is measured as it would be emitted.
"""

from __future__ import annotations

from hctune import allocators
from hctune import knobs as _knobs
from hctune.allocators.hc import (GUIDELINE_ORDER, GUIDELINE_QL_HIGH_LOWER,  # noqa: F401 (said
                                  GUIDELINE_QL_HIGH_START)                  # with the walk)
from hctune.allocators.hc import guideline as _walk
from hctune.search import space


def guideline() -> list[tuple[str, dict]]:
    """The §5.2 walk from pure segregated storage towards least memory, as (label, setting)."""
    return [(label, space.for_search(s)) for label, s in _walk()]


def presets(objective: str) -> list[tuple[str, dict]]:
    """The Table 6 and Table 7 settings; rows tuned for `objective` (mem|perf) come first."""
    names = [n for n in _knobs.preset_names() if n != "generic"]
    if objective in ("mem", "perf"):
        names.sort(key=lambda n: not n.endswith("-" + objective))  # stable: file order kept
    return [(n, space.for_search(_knobs.preset(n))) for n in names]


def seeds(objective: str, allocator: str | None = None) -> list[tuple[str, dict]]:
    """Every seed of `allocator` (None: HC) as the search measures it, duplicates (same
    setting) removed, first label kept: the allocator as it comes first (HC: generic; another:
    its library defaults), then what its family says to try (allocators.Family.seeds)."""
    fam = allocators.family(allocator)
    first = [(fam.defaults_seed, {})] if fam.defaults_seed is not None else []
    out, seen = [], set()
    for label, setting in first + fam.seeds(objective):
        setting = space.for_search(setting, allocator)
        k = fam.key(setting)
        if k not in seen:
            seen.add(k)
            out.append((label, setting))
    return out
