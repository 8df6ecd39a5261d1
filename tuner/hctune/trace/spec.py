"""The trace format's constants, read from configs/trace_format.toml (the one place they are said).

docs/trace-format.md describes the layout; tracer/hctrace.h is generated from the same file.
"""

from __future__ import annotations

import tomllib

from hctune import paths

SPEC_PATH = paths.CONFIGS / "trace_format.toml"


def load() -> dict:
    with open(SPEC_PATH, "rb") as f:
        return tomllib.load(f)


_S = load()
MAGIC = bytes(_S["format"]["magic"])
VERSION = _S["format"]["version"]
MIN_VERSION = _S["format"]["min_version"]
EXTENSION = _S["format"]["extension"]
H = _S["header"]
FLAG_TIME = _S["flags"]["TIME"]
FLAG_CLOCK = _S["flags"]["CLOCK"]
CLOCK_QUANTUM_NS = _S["chunk"]["CLOCK_QUANTUM_NS"]
OPS = dict(_S["ops"])                      # name -> code
OP_NAMES = {v: k.lower() for k, v in OPS.items()}  # code -> "malloc", ...
MALLOC, CALLOC, REALLOC, FREE, MEMALIGN = (OPS[k] for k in
                                           ("MALLOC", "CALLOC", "REALLOC", "FREE", "MEMALIGN"))
CHUNK_MARKER = _S["chunk"]["CHUNK_MARKER"]
CHUNK_HEADER_MAX = _S["chunk"]["CHUNK_HEADER_MAX"]
E = _S["event"]
OP_MASK, GRANULE_BIT = E["OP_MASK"], E["GRANULE_BIT"]
SEQ_SHIFT, SEQ_ESCAPE, PTR_GRANULE_SHIFT = E["SEQ_SHIFT"], E["SEQ_ESCAPE"], E["PTR_GRANULE_SHIFT"]
