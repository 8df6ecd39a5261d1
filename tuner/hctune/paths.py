"""Where hctune's non-Python parts are, in a checkout and in an installed wheel alike.

Use these, never a path computed from this file's location:

  data_dir()          configs/, templates/, allocator/, tracer/ (the C sources): the checkout's
                      own folders, or the copy a wheel carries as package data (hctune/_data/,
                      found with importlib.resources)
  cache_dir()         per-user cache of compiled native parts and HC builds:
                      $HCTUNE_CACHE, else $XDG_CACHE_HOME/hctune, else ~/.cache/hctune
  checkout()          the source checkout when running from one (its Makefile builds build/),
                      else None
  hctune.native.path("hcreplay" | "libhctrace.so" | ...)   a native part, built on first use

The module constants CONFIGS, TEMPLATES, ALLOCATOR, TRACER, BUILD, CACHE and ROOT are kept for
existing callers: ROOT is the checkout (or the data directory when installed), BUILD the
checkout's build/ (or cache_dir()/native when installed).
"""

from __future__ import annotations

import functools
import importlib.resources
import os
from pathlib import Path

_SOURCE_ROOT = Path(__file__).resolve().parents[2]


@functools.lru_cache(maxsize=None)
def checkout() -> Path | None:
    """The checkout this module runs from (an editable install), or None for a wheel."""
    if (_SOURCE_ROOT / "pyproject.toml").is_file() and (_SOURCE_ROOT / "configs").is_dir() \
            and (_SOURCE_ROOT / "tuner" / "hctune").is_dir():
        return _SOURCE_ROOT
    return None


@functools.lru_cache(maxsize=None)
def data_dir() -> Path:
    """The folder holding configs/, templates/, allocator/ and tracer/."""
    packaged = Path(str(importlib.resources.files("hctune") / "_data"))
    if (packaged / "configs").is_dir():
        return packaged
    root = checkout()
    if root is None:
        raise RuntimeError("hctune's data files are missing: reinstall the package")
    return root


def cache_dir() -> Path:
    """The per-user cache (not created here)."""
    if os.environ.get("HCTUNE_CACHE"):
        return Path(os.environ["HCTUNE_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "hctune"


def build_dir() -> Path:
    """Where `make` puts the native parts (checkout), or where hctune.native builds them."""
    if os.environ.get("HCTUNE_BUILD"):
        return Path(os.environ["HCTUNE_BUILD"])
    root = checkout()
    return root / "build" if root is not None else cache_dir() / "native"


ROOT = checkout() or data_dir()
CONFIGS = data_dir() / "configs"
TEMPLATES = data_dir() / "templates"
ALLOCATOR = data_dir() / "allocator"
TRACER = data_dir() / "tracer"
BUILD = build_dir()
# The HC build cache (one library per knob setting): build/cache in a checkout, as before,
# unless HCTUNE_CACHE names a cache; the per-user cache when installed.
CACHE = (BUILD / "cache" if checkout() is not None and not os.environ.get("HCTUNE_CACHE")
         else cache_dir() / "hc")
