"""The launcher that measures one real run: `allocator/replay/hcrun.c` (wall time, the child's
user+sys CPU time and its own ru_maxrss), compiled on first use into the build cache."""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path

from hctune import build, paths
from hctune.errors import HctuneError

HCRUN_SOURCE = paths.ALLOCATOR / "replay" / "hcrun.c"


def hcrun() -> Path:
    """build/cache/hcrun-<hash>/hcrun, compiled on first use (statically when possible)."""
    source = HCRUN_SOURCE.read_text()
    cc = build.compiler()
    key = hashlib.sha256(f"{source}\0{build.compiler_identity(cc)}".encode()).hexdigest()[:16]
    exe = paths.CACHE / f"hcrun-{key}" / "hcrun"
    if exe.exists():
        return exe
    paths.CACHE.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".hcrun-", dir=paths.CACHE))
    try:
        for extra in (["-static"], []):  # no static libc installed: dynamic, a little bigger
            res = subprocess.run([*shlex.split(cc), "-O2", *extra, str(HCRUN_SOURCE), "-o",
                                  str(tmp / "hcrun")], capture_output=True, text=True, check=False)
            if res.returncode == 0:
                break
        else:
            raise HctuneError(f"cannot compile {HCRUN_SOURCE.name}: "
                              f"{res.stderr.strip().splitlines()[-1] if res.stderr else cc}")
        try:
            os.rename(tmp, exe.parent)
        except OSError:
            if not exe.exists():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return exe
