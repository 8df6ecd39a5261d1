"""The HC build cache: one shared library per knob setting, compiled once and reused.

The knobs are compile-time, as in the paper (Hasan & Chang 2006, §3), so every setting the
search tries is its own build.  The cache key is the sha256 of the rendered malloc.c, the
compiler's identity and the flags, so a change to any of them is a new build and an unchanged
setting is never compiled twice.  Builds of the same key may race (the search runs trials in
parallel, on several machines sharing a checkout): each compiles in its own temporary
directory and renames it into place; the loser of the rename throws its copy away.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path

from hctune import knobs, paths
from hctune.errors import HctuneError

CFLAGS = ("-O2", "-fPIC", "-shared", "-pthread")
DEBUG_CFLAGS = ("-O1", "-g", "-fPIC", "-shared", "-pthread")
LIBRARY = "libhc.so"


class BuildError(HctuneError):
    """The rendered allocator did not compile (a bug in HC or the template, not the user's)."""


def compiler() -> str:
    return os.environ.get("CC", "cc")


@functools.lru_cache(maxsize=None)
def compiler_identity(cc: str) -> str:
    """The compiler's first --version line: part of the key, so an upgrade rebuilds."""
    try:
        out = subprocess.run([*shlex.split(cc), "--version"], capture_output=True, text=True,
                             timeout=30, check=False)
    except (OSError, subprocess.SubprocessError) as e:
        raise HctuneError(f"cannot run the C compiler {cc!r}: {e}") from None
    if out.returncode != 0:
        raise HctuneError(f"the C compiler {cc!r} does not work: {out.stderr.strip()[:200]}")
    return out.stdout.splitlines()[0].strip() if out.stdout else cc


def cache_key(source: str, cc: str, flags: tuple[str, ...]) -> str:
    h = hashlib.sha256()
    for part in (source, compiler_identity(cc), " ".join(flags)):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def build_hc(setting: dict, debug: bool = False, db=None) -> Path:
    """build/cache/<key>/libhc.so for this setting, compiled if not cached; recorded in db's
    builds table when a Database is given."""
    from hctune import render  # the HC allocator's part; imported late so the rest loads alone

    setting = knobs.complete(setting)
    source = render.render_malloc(setting, debug=debug)
    cc = compiler()
    flags = DEBUG_CFLAGS if debug else CFLAGS
    key = cache_key(source, cc, flags)
    final = paths.CACHE / key
    lib = final / LIBRARY
    if not lib.exists():
        _compile(source, cc, flags, final)
    if db is not None:
        db.add_build(key, knobs.key(setting), lib, compiler_identity(cc), " ".join(flags))
    return lib


def _compile(source: str, cc: str, flags: tuple[str, ...], final: Path) -> None:
    paths.CACHE.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name[:16]}-", dir=paths.CACHE))
    try:
        (tmp / "malloc.c").write_text(source)
        cmd = [*shlex.split(cc), *flags, "-o", str(tmp / LIBRARY), str(tmp / "malloc.c")]
        try:
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
        except (OSError, subprocess.SubprocessError) as e:
            raise BuildError(f"cannot run {cc}: {e}") from None
        if res.returncode != 0:
            (tmp / "build.log").write_text(res.stderr)
            first = next((ln for ln in res.stderr.splitlines() if "error" in ln),
                         res.stderr.strip().splitlines()[0] if res.stderr.strip() else "")
            raise BuildError(f"HC failed to compile ({' '.join(cmd[:1] + list(flags))}): "
                             f"{first.strip()[:300]}")
        (tmp / "cmd").write_text(" ".join(shlex.quote(c) for c in cmd) + "\n")
        try:
            os.rename(tmp, final)  # atomic: readers see a complete directory or none
        except OSError:
            if not (final / LIBRARY).exists():
                # not a lost race but a damaged entry (someone deleted the library): replace it
                shutil.rmtree(final, ignore_errors=True)
                os.rename(tmp, final)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
