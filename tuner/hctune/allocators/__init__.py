"""Allocator names -> what the replay harness preloads.

Every allocator runs in the same build/hcreplay, injected with LD_PRELOAD (glibc: nothing), so
they are measured alike.  Names:

Each allocator with knobs is a family (hctune.allocators.family: HC's compiled knobs, the
others' environment), named by hctune.allocators.registry; this module finds the libraries.

  hc          the HC allocator (Hasan & Chang 2006, §3) built for a setting (hctune.build)
  glibc       the C library's malloc, the descendant of the paper's DL anchor (§4.2)
  jemalloc    Debian libjemalloc2
  mimalloc    Debian libmimalloc2.0
  tcmalloc    Debian libtcmalloc-minimal4
  kingsley    build/libkingsley.so, the power-of-two CK baseline of §4.2 (made by `make`)
  bump        build/libhcbump.so, a bump pointer that only measures the harness's own cost
  PATH        any shared library that defines malloc/free/...
"""

from __future__ import annotations

import dataclasses
import functools
import os
import subprocess
from pathlib import Path

from hctune import allocator_knobs as _xknobs
from hctune import knobs, native
from hctune.errors import HctuneError

# name -> (file names to look for, Debian package that ships them), from configs/allocators.toml
SYSTEM = {a: (_xknobs.allocator(a).files, _xknobs.allocator(a).package)
          for a in _xknobs.names() if _xknobs.allocator(a).files}
BUILT = {"kingsley": "libkingsley.so", "bump": "libhcbump.so"}
NAMES = ("hc", "glibc", *SYSTEM, "kingsley")  # what users pick from; bump is for tests
BASELINES = ("glibc", "jemalloc", "mimalloc", "tcmalloc", "kingsley")

_LIB_DIRS = ("/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu", "/usr/lib64", "/lib64",
             "/usr/local/lib", "/usr/lib", "/lib")


@dataclasses.dataclass(frozen=True)
class Allocator:
    name: str                 # one of NAMES, "bump", or the path given
    library: Path | None      # what LD_PRELOAD gets; None for glibc
    # HC: the full setting it was built from; glibc, jemalloc, mimalloc, tcmalloc: the knobs
    # (configs/allocators.toml) that differ from the library's defaults ({}: its defaults)
    setting: dict | None = None
    variables: tuple = ()     # (name, value) of the environment that carries that setting

    def env(self, base: dict | None = None) -> dict:
        """The environment that runs a program on this allocator (with its setting)."""
        env = dict(os.environ if base is None else base)
        env.pop("LD_PRELOAD", None)
        if self.name in _xknobs.names():
            # the caller's own MALLOC_CONF (say) must not leak into a measurement
            for var in _xknobs.owned_vars(self.name):
                env.pop(var, None)
        if self.library is not None:
            env["LD_PRELOAD"] = str(self.library)
        env.update(dict(self.variables))
        return env


@functools.lru_cache(maxsize=None)
def _ldconfig() -> dict[str, str]:
    """{soname: path} from the dynamic linker's cache, for libraries outside _LIB_DIRS."""
    try:
        out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, timeout=10,
                             check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    found = {}
    for line in out.splitlines():
        name, sep, path = line.strip().partition(" => ")
        if sep and "x86-64" in name:
            found.setdefault(name.split()[0], path.strip())
    return found


def find_system(name: str) -> Path:
    files, package = SYSTEM[name]
    for f in files:
        for d in _LIB_DIRS:
            p = Path(d) / f
            if p.exists():
                return p
    for f in files:
        if f in _ldconfig():
            return Path(_ldconfig()[f])
    raise HctuneError(f"{name} is not installed ({' or '.join(files[:2])} not found); "
                      f"install the Debian package {package}")


def installed() -> dict[str, Path]:
    """{name: library} of the allocators of SYSTEM (jemalloc, mimalloc, tcmalloc) installed
    here, found as find_system finds them; those not installed are left out."""
    found = {}
    for name in SYSTEM:
        try:
            found[name] = find_system(name)
        except HctuneError:
            pass
    return found


def resolve(name: str, setting: dict | None = None, debug: bool = False, db=None,
            footprint: bool = False) -> Allocator:
    """The allocator called `name`; for hc, `setting` (default: the generic preset) is built
    through the build cache; for glibc, jemalloc, mimalloc and tcmalloc it is a dict of their
    knobs (configs/allocators.toml), carried by environment variables.  Unknown names, bad
    settings and missing libraries raise HctuneError. footprint: a compiled allocator is built
    by the recipe of a measurement of its footprint alone (hctune.build.FOOTPRINT_CFLAGS)."""
    name = (name or "").strip()
    if not name:
        raise HctuneError("empty allocator name")
    if setting is not None and registry.find(name) is None:
        raise HctuneError(f"a knob setting only applies to hc, {', '.join(_xknobs.names())}; "
                          f"not {name}")
    fam = registry.find(name)
    if fam is not None:
        return fam.prepare(setting, debug=debug, db=db, footprint=footprint)
    if name in BUILT:
        return Allocator(name, native.path(BUILT[name]))
    if "/" in name or name.endswith(".so") or ".so." in name:
        lib = Path(name).expanduser().resolve()
        if not lib.is_file():
            raise HctuneError(f"allocator library {name} does not exist")
        return Allocator(str(lib), lib)
    raise HctuneError(f"unknown allocator {name!r}; use one of {', '.join(NAMES)} "
                      f"or the path of a malloc shared library")


def parse_list(text: str) -> list[str]:
    """'glibc, jemalloc' -> ['glibc', 'jemalloc'] (order kept, duplicates dropped)."""
    out = []
    for item in (text or "").split(","):
        item = item.strip()
        if item and item not in out:
            out.append(item)
    return out


def setting_key(name: str, setting: dict | None) -> str | None:
    """A setting's canonical one-line form for database rows and cache keys: HC's
    (hctune.knobs.key), another allocator's knobs (allocator_knobs.key), None for no setting
    or another allocator's defaults (so they share rows with its plain measurements)."""
    if setting is None:
        return None
    return registry.family(name).key(setting)


def parse_setting(name: str, preset: str | None = None, sets=()) -> dict | None:
    """The setting `--preset`/`--set` ask for on allocator `name`: HC's full setting; for
    glibc, jemalloc, mimalloc, tcmalloc their changed knobs (`--set jemalloc.narenas=1`);
    None for other allocators, which have no knobs."""
    if registry.is_hc(name):
        return knobs.resolve(preset, sets)
    if preset:
        raise HctuneError(f"--preset and its named settings apply to the hc allocator, "
                          f"not {name}")
    if registry.find(name) is not None:
        return registry.family(name).parse(sets) if sets else None
    if sets:
        raise HctuneError(f"--set applies to hc, {', '.join(_xknobs.names())}; not {name}")
    return None


# the families (below everything above, which they use): HC and the environment-configured ones
from hctune.allocators import registry  # noqa: E402 (after Allocator and find_system: they use them)
from hctune.allocators.family import Family  # noqa: E402,F401
from hctune.allocators.registry import families, family, find, is_hc, of  # noqa: E402,F401
