"""hctune: profile a program's heap, tune the HC allocator (Hasan & Chang 2006) to it, emit malloc.c."""

import importlib.metadata as _metadata
import subprocess as _subprocess
from pathlib import Path as _Path


def _version() -> str:
    try:
        return _metadata.version("hctune")
    except _metadata.PackageNotFoundError:   # run from a checkout without installing it
        return "0+unknown"


def _commit() -> str | None:
    """The source commit (short hash, '+dirty' when changed) when running from a git checkout."""
    root = _Path(__file__).resolve().parents[2]
    if not (root / ".git").exists() or not (root / "pyproject.toml").is_file():
        return None
    try:
        out = _subprocess.run(["git", "-C", str(root), "describe", "--always", "--dirty=+dirty",
                               "--abbrev=10", "--exclude=*"], capture_output=True, text=True,
                              timeout=10, check=False)
    except (OSError, _subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


__version__ = _version()
__commit__ = _commit()
# What --version and the emitted malloc.c's provenance say: "0.1.0" or "0.1.0 (commit 1a2b3c4d5e)".
VERSION_TEXT = f"{__version__} (commit {__commit__})" if __commit__ else __version__
