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
import re
import shlex
import shutil
import socket
import subprocess
import tempfile
import tomllib
from pathlib import Path

from hctune import knobs, paths
from hctune.errors import HctuneError



@functools.lru_cache(maxsize=None)
def recipes() -> dict:
    """configs/build.toml: how every C part is compiled, said once."""
    return tomllib.loads((paths.CONFIGS / "build.toml").read_text())


CFLAGS = tuple(recipes()["hc"]["cflags"])
DEBUG_CFLAGS = tuple(recipes()["hc"]["debug_cflags"])
# a build measured for HC's footprint alone (configs/build.toml says why it may be -Og); its
# own cache entries, since the flags are part of the key
FOOTPRINT_CFLAGS = tuple(recipes()["hc"]["footprint_cflags"])
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
    except FileNotFoundError:
        raise HctuneError(f"no C compiler {cc!r}: install the Debian package build-essential "
                          f"(or set CC)") from None
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


def cached_hc(setting: dict) -> Path:
    """Where build_hc(setting) keeps its library (it may not be there yet): nothing compiled."""
    from hctune import render  # deferred: as build_hc
    source = render.render_malloc(knobs.complete(setting))
    return paths.CACHE / cache_key(source, compiler(), CFLAGS) / LIBRARY


def flags_of(debug: bool = False, footprint: bool = False) -> tuple[str, ...]:
    """The HC recipe's flags: the search's and the user's (CFLAGS), a debug build's, or a build
    measured for its footprint alone (FOOTPRINT_CFLAGS, asked by the search only:
    hctune.search.options.Options.footprint_build)."""
    return DEBUG_CFLAGS if debug else FOOTPRINT_CFLAGS if footprint else CFLAGS


def build_hc(setting: dict, debug: bool = False, db=None, footprint: bool = False) -> Path:
    """<HC build cache>/<key>/libhc.so for this setting, compiled if not cached; recorded in db's
    builds table when a Database is given. footprint: the recipe of a build whose only measure
    is HC's footprint (FOOTPRINT_CFLAGS); never what validate, emit or a download use."""
    from hctune import render  # deferred: the renderer loads Jinja2, which only an HC build needs

    setting = knobs.complete(setting)
    source = render.render_malloc(setting, debug=debug)
    cc = compiler()
    flags = flags_of(debug, footprint)
    key = cache_key(source, cc, flags)
    final = paths.CACHE / key
    lib = final / LIBRARY
    if not lib.exists():
        _compile(source, cc, flags, final)
    if db is not None:
        db.add_build(key, knobs.key(setting), lib, compiler_identity(cc), " ".join(flags))
    return lib


def _compile(source: str, cc: str, flags: tuple[str, ...], final: Path) -> None:
    def compile_in(tmp: Path) -> list[str]:
        (tmp / "malloc.c").write_text(source)
        cmd = [*shlex.split(cc), *flags, "-o", str(tmp / LIBRARY), str(tmp / "malloc.c")]
        res = run_compiler(cmd, cc, "HC")
        if res.returncode != 0:
            (tmp / "build.log").write_text(res.stderr)
            raise BuildError(f"HC failed to compile ({' '.join(cmd[:1] + list(flags))}): "
                             f"{first_error(res.stderr)}")
        return cmd

    build_into(final, LIBRARY, compile_in)


def run_compiler(cmd: list[str], cc: str, what: str) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    except FileNotFoundError:
        raise BuildError(f"cannot build {what}: no C compiler {cc!r} (install the Debian package "
                         f"build-essential, or set CC)") from None
    except (OSError, subprocess.SubprocessError) as e:
        raise BuildError(f"cannot build {what}: cannot run {cc}: {e}") from None


def first_error(stderr: str) -> str:
    """The compiler's first error line, e.g. a missing header ("fatal error: x.h: No such file")."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    first = next((ln for ln in lines if "error" in ln), lines[0] if lines else "")
    return first[:300]


# a temporary build directory is named .<key>-<host>~<pid>-<random> (sweep_orphans)
_TEMP = re.compile(r"^\.[^-]*-(.+)~(\d+)-[a-z0-9_]+$")


def sweep_orphans(directory: Path) -> int:
    """Remove the temporary build directories in `directory` whose process (of this machine)
    was killed mid-compile (SIGKILL runs no `finally`); those of live processes and of other
    machines sharing the directory stay. Returns how many went."""
    host, gone = socket.gethostname(), 0
    try:
        entries = list(Path(directory).iterdir())
    except OSError:
        return 0
    for p in entries:
        m = _TEMP.match(p.name)
        if m is None or m[1] != host or int(m[2]) == os.getpid():
            continue
        pid = m[2]
        try:
            os.kill(int(pid), 0)
            continue
        except ProcessLookupError:
            shutil.rmtree(p, ignore_errors=True)
            gone += 1
        except OSError:
            continue
    return gone


def build_into(final: Path, product: str, compile_in) -> Path:
    """Make the cache entry `final` (a directory holding `product`) unless it exists.

    `compile_in(tmp)` writes `product` into a fresh private directory `tmp` next to `final`
    and returns the command it ran; the directory is then renamed into place (atomic: readers
    see a complete entry or none; when two processes race, the loser discards its copy)."""
    if (final / product).exists():
        return final / product
    final.parent.mkdir(parents=True, exist_ok=True)
    sweep_orphans(final.parent)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name[:16]}-{socket.gethostname()}~{os.getpid()}-", dir=final.parent))
    try:
        cmd = compile_in(tmp)
        (tmp / "cmd").write_text(" ".join(shlex.quote(c) for c in cmd) + "\n")
        try:
            os.rename(tmp, final)
        except OSError:
            if not (final / product).exists():
                # not a lost race but a damaged entry (someone deleted the product): replace it
                shutil.rmtree(final, ignore_errors=True)
                os.rename(tmp, final)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return final / product
