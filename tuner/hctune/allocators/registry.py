"""The allocator families by name: HC, and each allocator of configs/allocators.toml. The one
place that knows HC apart by its name; code above asks `family(name)`."""

from __future__ import annotations

import functools

from hctune import allocator_knobs as _xknobs
from hctune.allocators.environ import Environ
from hctune.allocators.family import Family, Plain
from hctune.allocators.hc import HC
from hctune.errors import HctuneError

HC_NAME = "hc"


@functools.lru_cache(maxsize=None)
def _families() -> dict[str, Family]:
    return {HC_NAME: HC(), **{n: Environ(n) for n in _xknobs.names()}}


def families() -> dict[str, Family]:
    """{name: family}: hc first, then configs/allocators.toml's order."""
    return dict(_families())


def find(name: str | None) -> Family | None:
    """The family called `name` (None, or a name without declared knobs: None)."""
    return _families().get(name or HC_NAME)


def family(name: str | None) -> Family:
    """The family called `name` (None: HC, the allocator of every setting stored without
    one); one clear error for an allocator without declared knobs."""
    f = find(name)
    if f is None:
        raise HctuneError(f"no knobs are declared for allocator {name!r}; declared: "
                          f"{', '.join(_families())}")
    return f


def of(name: str | None) -> Family:
    """The family of any allocator name: a declared one (None: HC), else a Plain one (an
    allocator without knobs, as it comes: kingsley, bump, a library path)."""
    return find(name) or Plain(name)


def is_hc(name: str | None) -> bool:
    """`name` is HC's (None: stored before allocators had names)."""
    return (name or HC_NAME) == HC_NAME
