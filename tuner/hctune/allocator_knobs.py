"""The knobs of glibc, jemalloc, mimalloc and tcmalloc, read from configs/allocators.toml (the
single place they are declared; HC's own are in knobs.toml, read by hctune.knobs).

A *setting* of one of these allocators is a dict {knob: value} of the knobs that differ from the
library's defaults (an empty dict: the library as installed). `env` turns it into the
environment the library reads (GLIBC_TUNABLES, MALLOC_CONF, MIMALLOC_*, TCMALLOC_*); `key` is
its canonical one-line form (database rows, cache keys); `parse_sets` reads
`--set ALLOCATOR.KNOB=VALUE`.
"""

from __future__ import annotations

import dataclasses
import functools
import tomllib
from typing import Iterable

from hctune import paths
from hctune.errors import HctuneError
from hctune.setting import Setting

STYLES = ("tunables", "malloc_conf", "environment")
# the variables each style writes (what an allocator's environment must clear first)
STYLE_VARS = {"tunables": ("GLIBC_TUNABLES",), "malloc_conf": ("MALLOC_CONF",)}


@dataclasses.dataclass(frozen=True)
class XKnob:
    allocator: str
    name: str
    option: str               # the library's own name
    type: str                 # bool | int | float | choice
    default: object
    why: str
    search: str
    min: float | int | None = None
    max: float | int | None = None
    unit: str = ""
    choices: tuple = ()
    search_step: int | None = None
    search_min: float | int | None = None
    search_max: float | int | None = None
    threads: bool = False
    inert: str = ""

    @property
    def full_name(self) -> str:
        return f"{self.allocator}.{self.name}"

    def parse(self, text: str):
        """A value from the command line, checked; HctuneError (one line) when it is bad."""
        text = text.strip()
        if self.type == "choice":
            return self.check(text)
        if self.type == "bool":
            low = text.lower()
            if low in ("1", "true", "yes", "on"):
                return 1
            if low in ("0", "false", "no", "off"):
                return 0
            raise HctuneError(f"{self.full_name} is a boolean knob: use 0 or 1, not {text!r}")
        try:
            value = float(text) if self.type == "float" else int(text, 0)
        except ValueError:
            kind = "a number" if self.type == "float" else "an integer"
            raise HctuneError(f"{self.full_name}: {text!r} is not {kind}") from None
        return self.check(value)

    def check(self, value):
        if self.type == "choice":
            if value not in self.choices:
                raise HctuneError(f"{self.full_name} is one of {', '.join(self.choices)}, "
                                  f"not {value!r}")
            return value
        if self.type == "bool":
            if value not in (0, 1, True, False):
                raise HctuneError(f"{self.full_name} is a boolean knob: use 0 or 1, "
                                  f"not {value!r}")
            return int(value)
        if self.type == "int":
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()) \
                    or not isinstance(value, (int, float)):
                raise HctuneError(f"{self.full_name} must be an integer, not {value!r}")
            value = int(value)
        else:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise HctuneError(f"{self.full_name} must be a number, not {value!r}")
            value = float(value)
        if (self.min is not None and value < self.min) or \
                (self.max is not None and value > self.max):
            raise HctuneError(f"{self.full_name}={value} is outside its range "
                              f"{self.min}..{self.max}" + (f" ({self.unit})" if self.unit else ""))
        return value

    def text(self, value) -> str:
        """The value as the library reads it."""
        if self.type == "bool":
            return {"malloc_conf": ("false", "true")}.get(
                allocator(self.allocator).style, ("0", "1"))[int(value)]
        if self.type == "float":
            return f"{float(value):g}"
        return str(value)


@dataclasses.dataclass(frozen=True)
class XAllocator:
    name: str
    package: str
    files: tuple[str, ...]
    style: str
    doc: str
    knobs: dict  # name -> XKnob, in file order
    seeds: tuple = ()  # (name, objectives, source, setting): advice a search tries early
    validated: tuple = ()  # names of the seeds validation runs itself (`validate = true`)


@functools.lru_cache(maxsize=None)
def _table() -> dict[str, XAllocator]:
    with open(paths.CONFIGS / "allocators.toml", "rb") as f:
        raw = tomllib.load(f)
    out = {}
    for name, a in raw.items():
        if a["style"] not in STYLES:
            raise HctuneError(f"allocators.toml: {name}: unknown style {a['style']!r}")
        ks = {}
        for kname, fields in a.get("knobs", {}).items():
            fields = dict(fields)
            if "choices" in fields:
                fields["choices"] = tuple(fields["choices"])
            ks[kname] = XKnob(allocator=name, name=kname, **fields)
        out[name] = XAllocator(name=name, package=a["package"], files=tuple(a["files"]),
                               style=a["style"], doc=a["doc"], knobs=ks)
        seeds, validated = [], []
        for sname, fields in a.get("seeds", {}).items():
            fields = dict(fields)
            objectives = tuple(fields.pop("objectives"))
            source = fields.pop("source")
            if fields.pop("validate", False):
                validated.append(sname)
            seeds.append((sname, objectives, source, complete(name, fields, out[name])))
        out[name] = dataclasses.replace(out[name], seeds=tuple(seeds),
                                        validated=tuple(validated))
    return out


def names() -> list[str]:
    """The allocators with declared knobs, in file order."""
    return list(_table())


def allocator(name: str) -> XAllocator:
    t = _table()
    if name not in t:
        raise HctuneError(f"no knobs are declared for allocator {name!r}; declared: "
                          f"{', '.join(t)} (and hc, whose knobs are HC's own)")
    return t[name]


def knobs(name: str) -> dict[str, XKnob]:
    return allocator(name).knobs


def knob(name: str, kname: str) -> XKnob:
    table = knobs(name)
    if kname not in table:
        raise HctuneError(f"unknown {name} knob {kname!r}; known: {', '.join(table)}")
    return table[kname]


def defaults(name: str) -> dict:
    return {k.name: k.default for k in knobs(name).values()}


def complete(name: str, partial: dict | None, _alloc: XAllocator | None = None) -> dict:
    """A setting checked and reduced to the knobs that differ from the library's defaults (a
    Setting: completing it again returns it as it is, see hctune.setting)."""
    if Setting.done(name, partial):
        return partial
    table = (_alloc or allocator(name)).knobs
    out = {}
    for kname, value in (partial or {}).items():
        if kname not in table:
            raise HctuneError(f"unknown {name} knob {kname!r}; known: {', '.join(table)}")
        k = table[kname]
        value = k.check(value)
        if value != k.check(k.default):
            out[kname] = value
    return Setting(name, {n: out[n] for n in table if n in out})  # file order


def parse_sets(name: str, items: Iterable[str]) -> dict:
    """`["narenas=1", "jemalloc.tcache=0"]` for allocator `name` -> {"narenas": 1, "tcache": 0};
    an item naming another allocator, an unknown knob or a bad value is one clear error."""
    out = {}
    for item in items:
        kname, sep, text = item.partition("=")
        kname = kname.strip()
        if not sep or not text.strip():
            raise HctuneError(f"--set wants {name}.KNOB=VALUE, got {item!r}")
        prefix, dot, rest = kname.partition(".")
        if dot:
            if prefix != name:
                raise HctuneError(f"--set {item}: the allocator is {name}, not {prefix}")
            kname = rest
        kname = kname.lower()
        out[kname] = knob(name, kname).parse(text)
    return complete(name, out)


def env_vars(name: str, setting: dict | None) -> dict[str, str]:
    """{variable: value} that makes the library take `setting` (only what differs from its
    defaults; {} for the defaults)."""
    a = allocator(name)
    setting = complete(name, setting)
    if not setting:
        return {}
    pairs = [(a.knobs[n], v) for n, v in setting.items()]
    if a.style == "tunables":
        return {"GLIBC_TUNABLES": ":".join(f"{k.option}={k.text(v)}" for k, v in pairs)}
    if a.style == "malloc_conf":
        return {"MALLOC_CONF": ",".join(f"{k.option}:{k.text(v)}" for k, v in pairs)}
    return {k.option: k.text(v) for k, v in pairs}


def owned_vars(name: str) -> tuple[str, ...]:
    """Every variable through which the library reads its knobs (cleared before a run, so the
    caller's own environment cannot leak into a measurement)."""
    a = allocator(name)
    if a.style in STYLE_VARS:
        return STYLE_VARS[a.style]
    return tuple(k.option for k in a.knobs.values())


def key(name: str, setting: dict | None) -> str:
    """The canonical one-line form: `narenas=1,tcache=0` ('' for the defaults)."""
    setting = complete(name, setting)
    return ",".join(f"{n}={v}" for n, v in setting.items())


def from_key(name: str, text: str | None) -> dict:
    """The setting of a `key` string."""
    if not text:
        return {}
    return parse_sets(name, text.split(","))


def describe(name: str, setting: dict | None) -> str:
    """How a user reads it: `jemalloc with dirty_decay_ms:0,muzzy_decay_ms:0`, `glibc
    (defaults)`."""
    env = env_vars(name, setting)
    if not env:
        return f"{name} (defaults)"
    return f"{name} with " + " ".join(f"{k}={v}" for k, v in env.items())


def validated_seeds(name: str, objective: str) -> list[tuple[str, dict]]:
    """(seed name, setting) of `name`'s seeds for `objective` that validation runs itself
    (`validate = true`: their effect, page faults, is one the replay cannot see)."""
    a = allocator(name)
    return [(sname, setting) for sname, objectives, _, setting in a.seeds
            if sname in a.validated and objective in objectives]


def seeds(name: str, objective: str) -> list[tuple[str, dict]]:
    """(label, setting) of the advice declared for `name` that applies to `objective`."""
    return [(f"{name} {sname} ({source})", setting)
            for sname, objectives, source, setting in allocator(name).seeds
            if objective in objectives]
