"""Where the bytes go: each allocator's RSS at the trace's peak, split into parts.

The question allocator users ask most is why RSS is so far above what the program holds. The
replay can answer it for every allocator on the same trace: `hcreplay --explain` (C,
allocator/replay/hcreplay_explain.c) replays the trace once in recorded order on one thread,
stops at the op where the most requested bytes are live, and reads there

* live — the requested bytes of the live blocks (the trace says them);
* internal_fragmentation — their `malloc_usable_size` less what was asked (rounding to a block
  size or a size class);
* metadata — the allocator's own bookkeeping: block headers and rounding beyond the usable size,
  and the metadata it reports (jemalloc `stats.metadata`, tcmalloc's total physical bytes less
  its mapped heap);
* free_in_allocator — freed blocks it keeps for reuse (glibc and HC: `mallinfo2().fordblks`
  less the top or wilderness; jemalloc: active less allocated, plus the thread caches;
  tcmalloc: its central, transfer and thread caches; mimalloc: committed less in use, its
  page and segment headers included, as it reports no metadata apart);
* not_returned — free pages still resident (glibc: the resident pages of the top chunk, by
  `mincore`; jemalloc: dirty and muzzy pages; tcmalloc: the page heap's free bytes; HC: its
  wilderness, bounded by what the RSS leaves);
* other — the replay's own memory: the RSS before the replay (the harness, its libraries, the
  loaded trace) less what the allocator already held then.

A multi-threaded trace is replayed in its recorded order on one thread: the parts are the
allocator's answer to that sequence of calls, without its per-thread caches and arenas.

Each part comes from the allocator's own statistics, not from the RSS, so their sum is a check
on the RSS measured at the same moment (`unaccounted`, `check_pct`). A part an allocator does
not report (mimalloc's metadata, the resident part of HC's wilderness) is the remainder of the
RSS, capped by what the allocator does report (mimalloc's committed memory, HC's wilderness),
and `estimated` names it. The same replay goes
on to the end sampling live bytes and RSS: `curve`, the timeline.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from hctune import allocators, native
from hctune.errors import HctuneError

PARTS = ("live", "internal_fragmentation", "free_in_allocator", "metadata", "not_returned",
         "other")
# the parts must add up to the RSS within this fraction (what the tests hold every allocator to)
TOLERANCE = 0.10
DEFAULT = ("glibc", "hc", "jemalloc", "mimalloc", "tcmalloc")


class ExplainError(HctuneError):
    """The explaining replay failed (bad trace, crashed allocator)."""


def candidates(names=DEFAULT, hc_setting: dict | None = None) -> list[dict]:
    """[{"label", "allocator", "setting"}] for the installed ones among `names` (HC: generic,
    or `hc_setting`); an allocator that is not installed is left out."""
    out = []
    for n in names:
        fam = allocators.of(n)
        if not fam.available():
            continue
        # HC as `make` builds it (Table 6, ARENAS=4): "hc:generic", as `compare` names it
        label, setting = fam.as_run(hc_setting)
        out.append({"label": label, "allocator": n, "setting": setting})
    return out


def _parts(raw: dict) -> dict:
    """The parts of one allocator's RSS from hcreplay --explain's figures; an estimated part is
    what the RSS leaves once the others are counted, at most what the allocator reports."""
    parts = {"live": raw["live"], "internal_fragmentation": max(0, raw["usable"] - raw["live"]),
             "free_in_allocator": raw["free_in_allocator"], "metadata": raw["metadata"],
             "not_returned": raw["not_returned"], "other": raw["other"]}
    est = raw.get("estimated")
    if est in parts:
        rest = raw["rss"] - sum(v for k, v in parts.items() if k != est)
        cap = raw[est] if raw[est] else rest      # metadata unreported: only the remainder
        parts[est] = max(0, min(rest, cap))
    return parts


def run(trace, label: str, allocator: str, setting: dict | None = None,
        timeout: float | None = 600.0) -> dict:
    """One candidate's parts at the trace's peak, with its curve."""
    alloc = allocators.resolve(allocator, setting)
    cmd = [str(native.path("hcreplay")), str(trace), "--explain"]
    try:
        res = subprocess.run(cmd, env=alloc.env(), capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise ExplainError(f"explain {trace} on {label}: no result within {timeout:g} s") \
            from None
    if res.returncode != 0:
        lines = res.stderr.decode("utf-8", "replace").strip().splitlines()
        msg = next((ln.split("error: ", 1)[1] for ln in lines if "error: " in ln),
                   lines[-1] if lines else f"exit status {res.returncode}")
        raise ExplainError(f"explain {trace} on {label}: {msg}")
    raw = json.loads(res.stdout.decode("utf-8", "replace"))
    parts = _parts(raw)
    rss = raw["rss"]
    total = sum(parts.values())
    return {"label": label, "allocator": allocator,
            "setting": (allocators.setting_key(allocator, alloc.setting)
                        if alloc.setting else None),
            "detected": raw["allocator"], "rss": rss, "parts": parts,
            "estimated": raw.get("estimated"), "unaccounted": rss - total,
            "check_pct": round(100 * (rss - total) / rss, 2) if rss else 0.0,
            "peak_op": raw["peak_op"], "ops": raw["ops"], "failed": raw["failed"],
            "allocator_stats": raw["allocator_stats"],
            "curve": [{"op": o, "live": lv, "rss": r} for o, lv, r in raw["curve"]]}


def explain(trace, cands: list[dict] | None = None, timeout: float | None = 600.0,
            on_result=None) -> dict:
    """Every candidate on `trace` ({"trace", "peak_live", "peak_op", "ops", "candidates"});
    `cands` from `candidates()` (default: every installed allocator, HC generic);
    `on_result(entry)` after each."""
    p = Path(trace)
    if not p.is_file():
        raise HctuneError(f"trace {trace} does not exist" if not p.exists()
                          else f"trace {trace} is not a file")
    out = []
    for c in cands if cands is not None else candidates():
        e = run(p, c["label"], c["allocator"], c.get("setting"), timeout)
        out.append(e)
        if on_result:
            on_result(e)
    first = out[0] if out else {}
    return {"trace": str(p), "peak_live": first.get("parts", {}).get("live"),
            "peak_op": first.get("peak_op"), "ops": first.get("ops"),
            "how": "replayed once in recorded order on one thread, stopped at the op where the "
                   "most requested bytes are live; parts from each allocator's own statistics",
            "candidates": out}


def headroom(entry: dict) -> float | None:
    """The allocator's RSS (the RSS less the replay's own memory) over live at the peak, less
    1: what the allocator adds to what the program holds."""
    live = entry["parts"]["live"]
    return (entry["rss"] - entry["parts"]["other"]) / live - 1 if live else None
