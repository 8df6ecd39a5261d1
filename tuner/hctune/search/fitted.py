"""The fitted size-class tables a study searches (issue 36; docs/profile-guided.md).

The knobs FIT_1 .. FIT_8 and FIT_ALIGN8 are "fixed" in configs/knobs.toml: a table is not a
range to sample but a function of the traces (hctune.trace.fitted).  So a study derives its
tables once, from the union of its traces, at a few derivation settings (DERIVATIONS), keeps
the distinct ones that differ from generic HC, and stores them in the study (user attribute
STUDY_ATTR) so a resumed study has the same choices.  The search sees them as one categorical
parameter PARAM ("none", then each table's key), which `apply` turns into the FIT_ knob values
of the trial's HC setting; from there on the setting is an ordinary setting (build cache,
multi-fidelity, emit).  Each table is also queued as a seed on top of generic HC.
"""

from __future__ import annotations

from hctune import knobs as _knobs
from hctune.errors import HctuneError
from hctune.trace import fitted as _fitted

PARAM = "fit"            # the Optuna parameter: "none" or a table's key
NONE = "none"
STUDY_ATTR = "fit_tables"
NOTES_ATTR = "fit_notes"
# (key, waste bound in per mille, grain): the bound 0 adds every class that saves half a page
# (at most eight), 10 stops at 1 % of the live bytes; grain 8 allows 8-byte classes (FIT_ALIGN8)
DERIVATIONS = (("w0", 0, 16), ("w10", 10, 16), ("w0-g8", 0, 8), ("w10-g8", 10, 8))
FIT_KNOBS = tuple(f"FIT_{i + 1}" for i in range(_fitted.FIT_MAX)) + ("FIT_ALIGN8",)


def derive(paths) -> tuple[list[tuple[str, dict]], list[str]]:
    """([(key, {FIT_ knob: value})], notes) for the traces `paths` (their union): distinct
    tables only, none equal to generic HC's classes, in DERIVATIONS' order."""
    prof = _fitted.profile(paths)
    tables: list[tuple[str, dict]] = []
    notes: list[str] = []
    seen = set()
    for key, waste, grain in DERIVATIONS:
        fit = _fitted.derive(prof, waste, grain=grain)
        if not fit.table:
            if not notes:
                notes.append(f"fitted size classes: none ({fit.note}); the search tries "
                             "none")
            continue
        values = {**fit.knobs(), "FIT_ALIGN8": int(grain == 8 and
                                                   any(c % 16 for c in fit.table))}
        sig = tuple(sorted(values.items()))
        if sig in seen:
            continue
        seen.add(sig)
        tables.append((key, values))
    if tables:
        notes = []
    return tables, notes


def study_tables(study, paths, notice=None) -> dict[str, dict]:
    """The study's tables {key: FIT_ values}: derived when the study is new and stored in it;
    read back when it is resumed (a study made before this has none, so its parameters stay)."""
    stored = study.user_attrs.get(STUDY_ATTR)
    if stored is None:
        tables, notes = [], []
        if not study.trials:
            try:
                tables, notes = derive(paths)
            except HctuneError as e:     # the replay says what is wrong with the trace
                study.set_user_attr(NOTES_ATTR, [f"fitted size classes: not derived "
                                                 f"({str(e).splitlines()[0]})"])
        study.set_user_attr(STUDY_ATTR, [[k, v] for k, v in tables])
        if notes:
            study.set_user_attr(NOTES_ATTR, notes)
        stored = [[k, v] for k, v in tables]
        if notice:
            for line in notes:
                notice(line)
    return {k: {n: int(x) for n, x in v.items()} for k, v in stored}


def choices(tables: dict) -> list[str]:
    return [NONE, *tables]


def apply(setting: dict, key: str | None, tables: dict) -> dict:
    """`setting` (HC's, full) with table `key`'s FIT_ values (NONE/None: as it is)."""
    if key in (None, NONE):
        return setting
    return _knobs.complete({**setting, **within_pages(tables[key], setting.get("SMALL_MAX", 0))})


def within_pages(values: dict, small_max: int) -> dict:
    """A table's FIT_ values with the classes the setting's small pages cannot serve left out:
    a sampled SMALL_MAX below a fitted class (256 with a 1,040-byte class) would not compile
    (hc_fit.c's check), and the pages off (0) use no table. An emptied table drops FIT_ALIGN8."""
    limit = min(int(small_max or 0), 4096)
    kept = [values.get(f"FIT_{i + 1}", 0) for i in range(_fitted.FIT_MAX)]
    kept = [c for c in kept if c and c <= limit]
    out = {f"FIT_{i + 1}": (kept[i] if i < len(kept) else 0) for i in range(_fitted.FIT_MAX)}
    out["FIT_ALIGN8"] = int(bool(values.get("FIT_ALIGN8")) and any(c % 16 for c in kept))
    return out


def describe(setting: dict) -> str | None:
    """One line on a setting's fitted classes, or None when it has none."""
    table = [setting.get(f"FIT_{i + 1}", 0) for i in range(_fitted.FIT_MAX)]
    table = [c for c in table if c]
    if not table:
        return None
    grain = 8 if setting.get("FIT_ALIGN8") else 16
    return (f"fitted size classes {', '.join(map(str, table))} bytes ({grain}-byte grain), "
            f"derived from the study's traces (hctune.trace.fitted)")
