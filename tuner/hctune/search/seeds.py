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

from hctune import knobs as _knobs
from hctune.search import space

# §5.2: "turn off SPLIT and all coalescing parameters and start with a high value for QL_HIGH".
GUIDELINE_QL_HIGH_START = 512
# §5.2: "Further reduction in memory consumption can be attempted by decreasing QL_HIGH".
GUIDELINE_QL_HIGH_LOWER = (256, 128, 64)
# §5.2 names SPLIT first, then "other coalescing parameters", in the order of §3.7, §3.8, §3.11.
GUIDELINE_ORDER = ("SPLIT", "COALESCE", "COALESCE_QL", "COALESCE_IN_FREE")


def guideline() -> list[tuple[str, dict]]:
    """The §5.2 walk from pure segregated storage towards least memory, as (label, setting)."""
    step = {name: 0 for name in GUIDELINE_ORDER}
    step["QL_HIGH"] = GUIDELINE_QL_HIGH_START
    out = [("§5.2 pure segregated storage", dict(step))]
    for name in GUIDELINE_ORDER:
        step[name] = 1
        out.append((f"§5.2 +{name}", dict(step)))
    for ql in GUIDELINE_QL_HIGH_LOWER:
        step["QL_HIGH"] = ql
        out.append((f"§5.2 QL_HIGH={ql}", dict(step)))
    return [(label, space.for_search(s)) for label, s in out]


def presets(objective: str) -> list[tuple[str, dict]]:
    """The Table 6 and Table 7 settings; rows tuned for `objective` (mem|perf) come first."""
    names = [n for n in _knobs.preset_names() if n != "generic"]
    if objective in ("mem", "perf"):
        names.sort(key=lambda n: not n.endswith("-" + objective))  # stable: file order kept
    return [(n, space.for_search(_knobs.preset(n))) for n in names]


def seeds(objective: str) -> list[tuple[str, dict]]:
    """Every seed, duplicates (same full setting) removed, first label kept."""
    out, seen = [], set()
    candidates = [("generic", space.for_search(_knobs.preset("generic")))]
    candidates += guideline() + presets(objective)
    for label, setting in candidates:
        k = _knobs.key(setting)
        if k not in seen:
            seen.add(k)
            out.append((label, setting))
    return out
