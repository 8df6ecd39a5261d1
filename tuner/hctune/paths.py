"""Where the project's non-Python parts live (hctune runs from its checkout: `pip install -e .`)."""

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "configs"
TEMPLATES = ROOT / "templates"
ALLOCATOR = ROOT / "allocator"
PINTOOL = ROOT / "pintool"
# Build products of `make` (harness, tracer, baselines) and the per-setting build cache.
BUILD = Path(os.environ.get("HCTUNE_BUILD", ROOT / "build"))
CACHE = Path(os.environ.get("HCTUNE_CACHE", BUILD / "cache"))
