"""The launcher that measures one real run: `allocator/replay/hcrun.c` (wall time, the child's
user+sys CPU time and its own ru_maxrss), a native part (configs/build.toml's recipe: static
when a static libc is installed)."""

from __future__ import annotations

from pathlib import Path

from hctune import native, paths

HCRUN_SOURCE = paths.ALLOCATOR / "replay" / "hcrun.c"


def hcrun() -> Path:
    """hcrun, compiled on first use into the per-user cache (hctune.native)."""
    return native.path("hcrun")
