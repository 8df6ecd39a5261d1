"""The launcher that measures one real run: `allocator/replay/hcrun.c` (wall time, the child's
user+sys CPU time and its own ru_maxrss), a native part (configs/build.toml's recipe: static
when a static libc is installed)."""

from __future__ import annotations

import ctypes
import ctypes.util
import hashlib
import shutil
import subprocess
from pathlib import Path

from hctune import native, paths

HCRUN_SOURCE = paths.ALLOCATOR / "replay" / "hcrun.c"


def hcrun() -> Path:
    """hcrun, compiled on first use into the per-user cache (hctune.native)."""
    return native.path("hcrun")


def _sha256(path: Path) -> str | None:
    try:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        return h.hexdigest()
    except OSError:
        return None


def _package(path: Path) -> tuple[str | None, str | None]:
    """(Debian package, its version) that installed `path`, or (None, None)."""
    if shutil.which("dpkg-query") is None:
        return None, None
    for p in dict.fromkeys([str(path), str(path.resolve())]):
        try:
            r = subprocess.run(["dpkg-query", "-S", p], capture_output=True, text=True,
                               timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return None, None
        if r.returncode == 0 and ":" in r.stdout:
            pkg = r.stdout.split(":", 1)[0].split(",")[0].strip()
            v = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", pkg],
                               capture_output=True, text=True, timeout=10)
            return pkg, (v.stdout.strip() or None) if v.returncode == 0 else None
    return None, None


def libraries(cands) -> dict:
    """What each candidate ran on, for `hctune check` to name what changed since: the library's
    path, the file it resolves to, its sha256, and the Debian package and version that installed
    it (glibc: libc.so.6's, with the C library's own version)."""
    out = {}
    for c in cands:
        if c.library is None:
            name = ctypes.util.find_library("c") or "libc.so.6"
            lib = ctypes.CDLL(name)
            lib.gnu_get_libc_version.restype = ctypes.c_char_p
            path = Path(next((line.split()[-1] for line in open("/proc/self/maps")
                              if "/libc.so" in line or "/libc-" in line), name))
            entry = {"path": str(path), "libc_version": lib.gnu_get_libc_version().decode()}
        else:
            path = Path(c.library)
            entry = {"path": str(path)}
        # what `hctune check` needs to run the candidate again
        entry.update(allocator=c.allocator, kind=c.kind, env=c.env, setting=c.setting)
        entry["resolved"] = str(path.resolve())
        entry["sha256"] = _sha256(path)
        entry["package"], entry["version"] = _package(path)
        out[c.label] = entry
    return out
