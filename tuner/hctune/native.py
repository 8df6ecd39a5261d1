"""hctune's native parts: the LD_PRELOAD tracer, the replay harness, the C trace tool, the
baselines (Kingsley, bump) and validate's launcher (hcrun), found or compiled on first use.

`path(name)` returns the product:
  - from a checkout, `make` builds them into build/ and that copy is used when present (the
    recipes are configs/build.toml's; tests/test_build_recipes.py checks the Makefile's);
  - otherwise (an installed wheel, or a checkout before `make`) it is compiled from the C
    sources in hctune's data directory into the per-user cache,
    <cache_dir()>/native/<name>-<key>/<name>, key = sha256 of the sources, the compiler's
    identity, the flags and whether valgrind's headers are present.  Builds are safe when two
    processes race (hctune.build.build_into: temp dir + atomic rename).
A product that cannot be built raises HctuneError with one line naming the missing compiler
or header.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shlex
import sys
from pathlib import Path

from hctune import paths
from hctune.build import BuildError, build_into, compiler, compiler_identity, first_error, \
    recipes, run_compiler

CFLAGS = tuple(recipes()["native"]["cflags"])


@dataclasses.dataclass(frozen=True)
class Recipe:
    sources: tuple[str, ...]     # globs relative to the data directory, compiled in this order
    headers: tuple[str, ...]     # globs of what they include (hashed into the key)
    flags: tuple[str, ...]       # after CFLAGS; -I paths relative to the data directory
    libs: tuple[str, ...] = ()
    what: str = ""
    static: bool = False         # try -static first (a static libc may not be installed)
    make: bool = True            # the Makefile builds it too (into build/)


# configs/build.toml's [native.parts], the one statement of these recipes
RECIPES = {name: Recipe(tuple(r["sources"]), tuple(r["headers"]), tuple(r["flags"]),
                        tuple(r["libs"]), r["what"], r.get("static", False), r.get("make", True))
           for name, r in recipes()["native"]["parts"].items()}
NAMES = tuple(RECIPES)

# Optional headers that change what a product does (hcreplay counts instructions only when
# valgrind's client-request header is there), so installing them later rebuilds it.
_OPTIONAL_HEADERS = ("/usr/include/valgrind/callgrind.h",)


def _files(globs: tuple[str, ...]) -> list[Path]:
    root = paths.data_dir()
    out: list[Path] = []
    for g in globs:
        for p in sorted(root.glob(g)):
            if p not in out:
                out.append(p)
    return out


def key(name: str, cc: str | None = None) -> str:
    r = RECIPES[name]
    cc = cc or compiler()
    h = hashlib.sha256()
    for part in (name, compiler_identity(cc), " ".join(CFLAGS + r.flags + r.libs),
                 *(f"{os.path.exists(p)}" for p in _OPTIONAL_HEADERS)):
        h.update(part.encode() + b"\0")
    for f in _files(r.sources) + _files(r.headers):
        h.update(f.relative_to(paths.data_dir()).as_posix().encode() + b"\0")
        h.update(f.read_bytes() + b"\0")
    return h.hexdigest()[:24]


def made(name: str) -> Path | None:
    """The checkout's `make` product, if this is a checkout and it is built."""
    if name not in RECIPES:
        raise KeyError(name)
    if not RECIPES[name].make:
        return None
    p = paths.build_dir() / name
    return p if p.exists() else None


def cached(name: str) -> Path | None:
    """The per-user cache's build of the current sources, if there is one (no compiling)."""
    try:
        p = paths.cache_dir() / "native" / f"{name}-{key(name)}" / name
    except Exception:  # noqa: BLE001 - no compiler: nothing can be cached for it either
        return None
    return p if p.exists() else None


def path(name: str) -> Path:
    """The native part `name` (one of NAMES), compiled into the per-user cache if needed."""
    return made(name) or build(name)


def build(name: str) -> Path:
    r = RECIPES[name]
    cc = compiler()
    try:
        final = paths.cache_dir() / "native" / f"{name}-{key(name, cc)}"
    except BuildError:
        raise
    except Exception as e:  # compiler_identity's HctuneError: no compiler
        raise BuildError(f"cannot build {r.what} ({name}): {e}") from None
    root = paths.data_dir()

    def compile_in(tmp: Path) -> list[str]:
        # first use on this machine (an installed wheel): say what the pause is, once
        print(f"hctune: compiling {r.what} ({name}) on first use, into {final.parent}",
              file=sys.stderr, flush=True)
        out = tmp / name
        flags = [f"-I{root / f[2:]}" if f.startswith("-I") else f for f in r.flags]
        for static in ((["-static"], []) if r.static else ([],)):
            cmd = [*shlex.split(cc), *CFLAGS, *flags, *static, "-o", str(out),
                   *(str(p) for p in _files(r.sources)), *r.libs]
            res = run_compiler(cmd, cc, f"{r.what} ({name})")
            if res.returncode == 0:
                break
        if res.returncode != 0:
            (tmp / "build.log").write_text(res.stderr)
            raise BuildError(f"cannot build {r.what} ({name}): {first_error(res.stderr)}")
        return cmd

    return build_into(final, name, compile_in)


def status() -> dict[str, str | None]:
    """{name: path of a usable build, or None}, without compiling anything."""
    return {n: str(made(n) or cached(n) or "") or None for n in NAMES}
