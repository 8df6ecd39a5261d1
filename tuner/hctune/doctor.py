"""`hctune doctor`: what hctune can use on this machine, what is missing and how to add it.

Each dependency is checked the way the part that needs it looks for it (the allocators as
hctune.allocators finds them, the compiler as hctune.build runs it), and named with its Debian
package from configs/debian-packages.txt, the list scripts/setup-deps.sh installs.
"""

from __future__ import annotations

import glob
import os
import shutil
from dataclasses import asdict, dataclass

from hctune import VERSION_TEXT, allocators, build, native, paths
from hctune.errors import HctuneError


@dataclass
class Check:
    name: str
    present: bool
    detail: str          # the path or version found, or what is wrong
    used_for: str
    install: str         # the command that adds it
    required: bool = False


def packages() -> dict[str, tuple[bool, str]]:
    """{Debian package: (required, what for)} from configs/debian-packages.txt."""
    out = {}
    path = paths.data_dir() / "configs" / "debian-packages.txt"
    for line in path.read_text().splitlines():
        parts = line.split(None, 2)
        if len(parts) == 3 and not line.startswith("#"):
            out[parts[0]] = (parts[1] == "required", parts[2])
    return out


def _apt(pkg: str) -> str:
    return f"sudo apt-get install {pkg}"


def _which(*names: str) -> str | None:
    for n in names:
        found = shutil.which(n)
        if found:
            return found
    return None


def _postgres_server() -> str | None:
    found = _which("postgres", "pg_ctl")
    if found:
        return found
    hits = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"))
    return hits[-1] if hits else None


def checks() -> list[Check]:
    pkgs = packages()

    def dep(name, pkg, found, used_for=None):
        required, what = pkgs.get(pkg, (False, ""))
        present = bool(found)
        return Check(name, present, str(found) if present else "not found",
                     used_for or what, _apt(pkg), required)

    out = []
    cc = build.compiler()
    try:
        ident = build.compiler_identity(cc)
        out.append(Check("C compiler", True, f"{cc}: {ident}",
                         "HC builds, the tracer, the replay harness, emit --so",
                         _apt("build-essential"), True))
    except HctuneError as e:
        out.append(Check("C compiler", False, str(e),
                         "HC builds, the tracer, the replay harness, emit --so",
                         _apt("build-essential"), True))
    out.append(dep("valgrind", "valgrind", _which("valgrind"),
                   "--metric instructions (callgrind)"))
    for name in ("jemalloc", "mimalloc", "tcmalloc"):
        try:
            found = allocators.find_system(name)
        except HctuneError:
            found = None
        out.append(dep(name, allocators.SYSTEM[name][1], found, f"{name} in comparisons"))
    out.append(dep("PostgreSQL client", "postgresql", _which("psql"),
                   "search --storage postgresql:// (psql)"))
    out.append(dep("PostgreSQL server", "postgresql", _postgres_server(),
                   "a local PostgreSQL for shared studies and its tests"))
    out.append(dep("strace", "strace", _which("strace")))
    out.append(dep("chromium", "chromium", _which("chromium", "chromium-browser")))
    out.append(dep("chromedriver", "chromium-driver", _which("chromedriver")))
    pin = os.environ.get("PIN_ROOT")
    pin_ok = bool(pin) and os.path.exists(os.path.join(pin, "pin"))
    out.append(Check("Pin kit (PIN_ROOT)", pin_ok,
                     pin if pin_ok else (f"{pin}/pin not found" if pin else "PIN_ROOT is not set"),
                     "--tracer pin (statically linked programs)",
                     "download a Pin kit from Intel, then export PIN_ROOT=/path/to/pin-kit"))
    return out


def native_status() -> list[dict]:
    return [{"name": n, "built": p is not None, "path": p,
             "what": native.RECIPES[n].what}
            for n, p in native.status().items()]


def report() -> dict:
    return {
        "version": VERSION_TEXT,
        "data_dir": str(paths.data_dir()),
        "cache_dir": str(paths.cache_dir()),
        "checkout": str(paths.checkout()) if paths.checkout() else None,
        "dependencies": [asdict(c) for c in checks()],
        "native": native_status(),
    }


def text(r: dict) -> str:
    lines = [f"hctune {r['version']}", f"  data   {r['data_dir']}", f"  cache  {r['cache_dir']}",
             "", "dependencies:"]
    for d in r["dependencies"]:
        mark = "ok     " if d["present"] else ("MISSING" if d["required"] else "missing")
        lines.append(f"  {mark} {d['name']:<20} {d['detail'][:70]}")
        if not d["present"]:
            lines.append(f"          for {d['used_for']}; add it: {d['install']}")
    lines += ["", "native parts (compiled on first use when not built):"]
    for n in r["native"]:
        lines.append(f"  {'built  ' if n['built'] else 'not yet'} {n['name']:<16} "
                     f"{n['path'] or n['what']}")
    missing = [d["install"] for d in r["dependencies"] if not d["present"]]
    if missing:
        pkgs = sorted({m.split()[-1] for m in missing if m.startswith("sudo apt-get")})
        if pkgs:
            lines += ["", "all missing packages at once: " + _apt(" ".join(pkgs))]
    return "\n".join(lines)


