"""The HC allocator's knobs and presets, read from configs/ (the single place they are defined).

A *setting* is a dict {KNOB: value} naming every knob; `resolve` makes one from a preset and
`--set KNOB=VALUE` overrides, checking each value against its declared range.
"""

from __future__ import annotations

import dataclasses
import functools
import tomllib
from typing import Iterable

from hctune import paths
from hctune.errors import HctuneError
from hctune.setting import Setting


@dataclasses.dataclass(frozen=True)
class Knob:
    name: str
    type: str  # bool | int | float
    default: float | int
    section: str
    why: str
    search: str
    min: float | int | None = None
    max: float | int | None = None
    step: int | None = None
    unit: str = ""
    search_step: int | None = None
    search_min: float | int | None = None
    search_max: float | int | None = None
    threads: bool = False  # searched only when a trace of the study is multi-threaded
    single_thread_value: float | int | None = None  # held here in a single-threaded study
    # a fixed knob whose effect the replay cannot see (page faults, resident memory): validation
    # also runs generic HC with {"value": v} for a study of one of {"objectives": [...]}
    validate: dict | None = None

    def parse(self, text: str):
        """A value from the command line, checked; raises HctuneError with one clear line."""
        try:
            value = float(text) if self.type == "float" else int(text, 0)
        except ValueError:
            raise HctuneError(f"{self.name}: {text!r} is not a{'' if self.type == 'int' else ' '}"
                              f"{'n integer' if self.type != 'float' else 'number'}") from None
        return self.check(value)

    def check(self, value):
        if self.type == "bool":
            if value not in (0, 1, True, False):
                raise HctuneError(f"{self.name} is a boolean knob: use 0 or 1, not {value!r}")
            return int(value)
        if self.type == "int":
            if isinstance(value, float) and not value.is_integer():
                raise HctuneError(f"{self.name} must be an integer, not {value!r}")
            value = int(value)
        else:
            value = float(value)
        lo, hi = self.min, self.max
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            raise HctuneError(f"{self.name}={value} is outside its range {lo}..{hi} ({self.unit})")
        if self.step and (value - (lo or 0)) % self.step:
            raise HctuneError(f"{self.name}={value} must be {lo} plus a multiple of {self.step}")
        return value


@functools.lru_cache(maxsize=None)
def _knobs() -> tuple[Knob, ...]:
    with open(paths.CONFIGS / "knobs.toml", "rb") as f:
        raw = tomllib.load(f)
    return tuple(Knob(name=name, **fields) for name, fields in raw.items())


def knobs() -> dict[str, Knob]:
    """All knobs, in the order of configs/knobs.toml."""
    return {k.name: k for k in _knobs()}


def validated(objective: str) -> list[tuple[str, object]]:
    """(knob, value) of the fixed knobs that validation also tries on generic HC for
    `objective` (their `validate` field in configs/knobs.toml)."""
    return [(k.name, k.check(k.validate["value"])) for k in _knobs()
            if k.validate and objective in k.validate["objectives"]]


def defaults() -> dict:
    return {k.name: k.check(k.default) for k in _knobs()}


@functools.lru_cache(maxsize=None)
def _presets() -> dict[str, dict]:
    with open(paths.CONFIGS / "presets.toml", "rb") as f:
        return tomllib.load(f)


def preset_names() -> list[str]:
    return list(_presets())


def preset(name: str) -> dict:
    """The full setting of a named preset (knobs it does not name keep their defaults)."""
    raw = _presets().get(name)
    if raw is None:
        raise HctuneError(f"unknown preset {name!r}; known: {', '.join(preset_names())}")
    return complete({k: v for k, v in raw.items() if k != "source"})


def preset_source(name: str) -> str:
    preset(name)
    return _presets()[name].get("source", "")


def complete(partial: dict) -> dict:
    """Fill in defaults and check every value; unknown knob names are an error. The result is
    a Setting: completing it again returns it as it is (see hctune.setting)."""
    if Setting.done("hc", partial):
        return partial
    table = knobs()
    setting = defaults()
    for name, value in partial.items():
        if name not in table:
            raise HctuneError(f"unknown knob {name!r}; known: {', '.join(table)}")
        setting[name] = table[name].check(value)
    return Setting("hc", setting)


def parse_sets(items: Iterable[str]) -> dict:
    """`["QL_HIGH=128", "SPLIT=0"]` -> {"QL_HIGH": 128, "SPLIT": 0}, each checked."""
    table = knobs()
    out = {}
    for item in items:
        name, sep, text = item.partition("=")
        name = name.strip().upper()
        if not sep or not text.strip():
            raise HctuneError(f"--set wants KNOB=VALUE, got {item!r}")
        if name not in table:
            raise HctuneError(f"unknown knob {name!r}; known: {', '.join(table)}")
        out[name] = table[name].parse(text.strip())
    return out


def resolve(preset_name: str | None = None, sets: Iterable[str] = ()) -> dict:
    """A full setting: the preset (generic when none is named) with `--set` overrides."""
    base = preset(preset_name or "generic")
    base.update(parse_sets(sets))
    return base


def c_value(knob: Knob, value) -> str:
    if knob.type == "float":
        return repr(float(value))
    return str(int(value))


def defines(setting: dict) -> list[tuple[str, str]]:
    """(name, C literal) for every knob, in file order: what `#define` and `-D` take."""
    table = knobs()
    return [(name, c_value(table[name], setting[name])) for name in table]


def key(setting: dict) -> str:
    """A canonical one-line form of a setting, e.g. for cache keys and database rows."""
    return ",".join(f"{n}={v}" for n, v in defines(complete(setting)))


def diff_from(setting: dict, base: dict) -> dict:
    return {k: v for k, v in setting.items() if base.get(k) != v}
