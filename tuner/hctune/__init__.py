"""hctune: profile a program's heap, tune the HC allocator (Hasan & Chang 2006) to it, emit malloc.c.

__version__, __commit__ and VERSION_TEXT are computed on first use (PEP 562 module __getattr__):
the package metadata and `git describe` cost tens of milliseconds that `hctune --help` and the
commands that never print a version should not pay."""

import functools as _functools


def _version() -> str:
    import importlib.metadata as _metadata  # deferred: only --version asks
    try:
        return _metadata.version("hctune")
    except _metadata.PackageNotFoundError:   # run from a checkout without installing it
        return "0+unknown"


def _commit() -> str | None:
    """The source commit (short hash, '+dirty' when changed) when running from a git checkout."""
    import subprocess as _subprocess  # deferred: (as above)
    from pathlib import Path as _Path  # deferred: (as above)
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


@_functools.lru_cache(maxsize=None)
def _lazy(name: str):
    if name == "__version__":
        return _version()
    if name == "__commit__":
        return _commit()
    # What --version and the emitted malloc.c's provenance say: "0.1.0" or
    # "0.1.0 (commit 1a2b3c4d5e)".
    version, commit = _lazy("__version__"), _lazy("__commit__")
    return f"{version} (commit {commit})" if commit else version


def __getattr__(name: str):
    if name in ("__version__", "__commit__", "VERSION_TEXT"):
        return _lazy(name)
    raise AttributeError(f"module 'hctune' has no attribute {name!r}")
