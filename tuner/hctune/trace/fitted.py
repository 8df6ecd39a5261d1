"""Size classes fitted to a program (issue 36; docs/profile-guided.md; DESIGN.md §10).

The small pages' generic classes (allocator/hc/hc_page.c, hc_sp_classes) step by 16 bytes to 64,
then SMALL_CLASSES per power of two (MID_CLASSES above 1 KiB): a 72-byte request takes an
80-byte block, a 200-byte one 224.  The trace knows which sizes carry the program's live bytes,
so a setting may add up to FIT_MAX exact classes (multiples of 16: every block stays 16-byte
aligned) where the generic spacing wastes most.  What the profile never saw keeps the generic
classes, so a program run on other inputs is served as before, only less tuned.

The table is the knobs FIT_1 .. FIT_MAX (configs/knobs.toml; 0: unused), so a setting with a
table is a setting like any other (the build cache's key covers the rendered source).  It is a
deterministic function of the traces' size profile and two derivation parameters:
  - waste_permille: stop adding classes once the rounding the generic spacing adds, at the peak
    of live bytes, is at most this many thousandths of the peak live bytes;
  - classes: at most this many fitted classes (<= FIT_MAX).

The profile (`profile(paths)`): per request size below 64 KiB, the requests (churn) and the
blocks live at the first event where live bytes peak; several traces: their union (requests
summed, live blocks the larger of the traces' counts).  A size's weight is its blocks live at
the peak plus CHURN_WEIGHT times its requests scaled to the same total, so sizes that come and go
count too.  A class is added only if it saves at least MIN_GAIN bytes (half a 64 KiB page: a new
class costs up to one partly used page).
"""

from __future__ import annotations

import argparse
import bisect
import json
import sys
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from hctune import native
from hctune.errors import HctuneError
from hctune.trace import spec
from hctune.trace.reader import TraceError, open_trace

FIT_MAX = 8              # fitted classes at most (the knobs FIT_1 .. FIT_8)
LIMIT = 4096             # the small pages' largest class (HC_SP_LIMIT at SMALL_MAX = 4096)
GRAIN = 16               # every class is a multiple of 16 (16-byte alignment)
CHURN_WEIGHT = 0.25      # requests count a quarter as much as blocks live at the peak
MIN_GAIN = 32 * 1024     # bytes a class must save at the peak: half a page
SEEN = 65536             # hctrace-tool's per-size limit


@dataclass
class Profile:
    """Per size: requests and blocks live at the peak (sizes <= LIMIT kept; above, counted)."""
    sizes: dict[int, tuple[int, int]] = field(default_factory=dict)
    max_live_bytes: int = 0
    traces: list[str] = field(default_factory=list)
    above_requests: int = 0

    def live_bytes(self) -> int:
        return sum(z * live for z, (_, live) in self.sizes.items())


def _profile_python(path: Path) -> dict:
    """The hctrace-tool `sizes` definition in Python (small traces, or no compiler)."""
    t = open_trace(path)
    events = list(t)
    live: dict[int, int] = {}
    cur = peak = peak_at = 0
    for i, e in enumerate(events, 1):
        if e.op in (spec.FREE, spec.REALLOC):
            cur -= live.pop(e.old_ptr if e.op == spec.REALLOC else e.ptr, 0)
        if e.op != spec.FREE:
            cur -= live.pop(e.ptr, 0)
            live[e.ptr] = e.size
            cur += e.size
        if cur > peak:
            peak, peak_at = cur, i
    reqs: dict[int, int] = {}
    at_peak: dict[int, int] = {}
    live.clear()
    above_req = above_live = 0
    for i, e in enumerate(events, 1):
        if e.op in (spec.FREE, spec.REALLOC):
            live.pop(e.old_ptr if e.op == spec.REALLOC else e.ptr, None)
        if e.op != spec.FREE:
            live[e.ptr] = e.size
            if e.size < SEEN:
                reqs[e.size] = reqs.get(e.size, 0) + 1
            else:
                above_req += 1
        if i == peak_at:
            for z in live.values():
                if z < SEEN:
                    at_peak[z] = at_peak.get(z, 0) + 1
                else:
                    above_live += z
    sizes = [[z, reqs.get(z, 0), at_peak.get(z, 0)] for z in sorted(set(reqs) | set(at_peak))]
    return {"events": len(events), "max_live_bytes": peak, "peak_event": peak_at,
            "sizes": sizes,
            "above": {"limit": SEEN, "requests": above_req, "live_bytes": above_live}}


def _profile_one(path: Path, use_tool: bool | None = None) -> dict:
    try:
        tool = native.path("hctrace-tool") if use_tool is not False else None
    except HctuneError:
        tool = None
    if tool is None:
        return _profile_python(path)
    if not path.is_file():
        open_trace(path)     # the reader's one-line error
    r = subprocess.run([str(tool), "sizes", str(path)], capture_output=True, text=True)
    if r.returncode != 0:
        lines = (r.stderr or "hctrace-tool failed").strip().splitlines() or ["hctrace-tool failed"]
        raise TraceError(lines[-1])
    return json.loads(r.stdout)


_PEAKS: dict[tuple, tuple[int, int]] = {}   # (path, size, mtime) -> live_peak, per process


def _peak_key(p: Path) -> tuple | None:
    if not p.is_file():
        return None
    st = p.stat()
    return str(p.resolve()), st.st_size, st.st_mtime_ns


def _remember(p: Path, one: dict) -> tuple[int, int]:
    out = int(one["events"]), int(one["peak_event"])
    key = _peak_key(p)
    if key:
        _PEAKS[key] = out
    return out


def live_peak(path, use_tool: bool | None = None) -> tuple[int, int]:
    """(events, the first event at which live bytes peak) of one trace: where a prefix of it
    must reach to hold its peak of live bytes (search/fidelity.py). Remembered for the process
    (a study asks once for its fitted tables' profile, once for its parts)."""
    p = Path(path)
    found = _PEAKS.get(_peak_key(p))
    return found or _remember(p, _profile_one(p, use_tool))


def profile(paths, use_tool: bool | None = None) -> Profile:
    """The union of the traces' size profiles."""
    out = Profile()
    for p in paths:
        one = _profile_one(Path(p), use_tool)
        _remember(Path(p), one)
        out.traces.append(str(p))
        out.max_live_bytes = max(out.max_live_bytes, int(one["max_live_bytes"]))
        out.above_requests += int(one["above"]["requests"])
        for z, reqs, live in one["sizes"]:
            if z > LIMIT:
                out.above_requests += reqs
                continue
            r0, l0 = out.sizes.get(z, (0, 0))
            out.sizes[z] = (r0 + int(reqs), max(l0, int(live)))
    return out


def generic_classes(small_classes: int = 4, mid_classes: int = 16, p2_header: int = 0,
                    limit: int = LIMIT) -> list[int]:
    """hc_sp_classes' table (allocator/hc/hc_page.c), without fitted classes: the same loop."""
    per2 = 8 if small_classes >= 8 else 4 if small_classes >= 4 else 2 if small_classes >= 2 else 1
    mid = 0
    for m in (64, 32, 16, 8, 4, 2, 1):
        if mid_classes >= m:
            mid = m
            break
    span = 65536 - 256
    out: list[int] = []
    s = 16
    while True:
        fit = s
        if mid and s > 1024:
            fit = (span // (span // s)) & ~15
        if not out or fit > out[-1]:
            out.append(fit)
        if s >= limit:
            break
        if p2_header and s >= 128 and not (s & (s - 1)):
            x = s + 16
            if mid and x > 1024:
                x = (span // (span // x)) & ~15
            if x > out[-1] and x <= limit:
                out.append(x)
        p2 = 1 << (s.bit_length() - 1)
        per = mid if mid and s >= 1024 else per2
        s += max(p2 // per, 16)
    return out


def _class_of(classes: list[int], n: int) -> int:
    for c in classes:
        if c >= n:
            return c
    return classes[-1]


def _round(n: int, grain: int = GRAIN) -> int:
    return max(GRAIN, (n + grain - 1) // grain * grain)


def weights(prof: Profile) -> dict[int, float]:
    """Each size's weight in blocks: live at the peak + CHURN_WEIGHT x requests, scaled."""
    live_total = sum(live for _, live in prof.sizes.values())
    req_total = sum(r for r, _ in prof.sizes.values())
    scale = CHURN_WEIGHT * live_total / req_total if req_total else 0.0
    return {z: live + r * scale for z, (r, live) in prof.sizes.items()}


def excess(prof: Profile, classes: list[int], grain: int = GRAIN) -> float:
    """Weighted bytes the classes add above each size rounded to the grain (what no class of
    grain-aligned blocks could save)."""
    w = weights(prof)
    return sum(wz * (_class_of(classes, z) - _round(z, grain)) for z, wz in w.items()
               if z <= classes[-1])


@dataclass
class Fit:
    table: list[int]         # the fitted classes, ascending (at most FIT_MAX)
    note: str                # one line: what was derived, or why generic
    excess_before: float = 0.0
    excess_after: float = 0.0
    live_bytes: int = 0

    def knobs(self) -> dict[str, int]:
        """The FIT_1 .. FIT_MAX knobs of this table (0: unused)."""
        return {f"FIT_{i + 1}": (self.table[i] if i < len(self.table) else 0)
                for i in range(FIT_MAX)}


def derive(prof: Profile, waste_permille: int = 10, classes: int = FIT_MAX,
           base: list[int] | None = None, grain: int = GRAIN) -> Fit:
    """The fitted classes of prof: greedy, largest saving first, deterministic (ties: the
    smaller size), bounded by `classes` <= FIT_MAX."""
    if not 0 <= classes <= FIT_MAX:
        raise HctuneError(f"fitted classes: {classes} is outside 0..{FIT_MAX}")
    if waste_permille < 0:
        raise HctuneError(f"fitted classes: a waste bound of {waste_permille} per mille is negative")
    if grain not in (8, 16):
        raise HctuneError(f"fitted classes: a grain of {grain} bytes (use 8 or 16)")
    base = list(base or generic_classes())
    if not prof.sizes:
        why = ("no allocations" if not prof.above_requests
               else "only blocks above the small pages' sizes")
        return Fit([], f"generic classes: the profile has {why}")
    w = weights(prof)
    live = prof.live_bytes()
    table = list(base)
    before = cur = excess(prof, table, grain)
    # the weights by rounded size, and their running sums, so a candidate's saving is O(1)
    top = base[-1]
    per = [0.0] * (top // grain + 2)
    for z, wz in w.items():
        r = _round(z, grain)
        if r <= top:
            per[r // grain] += wz
    run = [0.0]
    for x in per:
        run.append(run[-1] + x)

    def between(lo: int, c: int) -> float:   # the weight of rounded sizes in (lo, c]
        return run[c // grain + 1] - run[lo // grain + 1]

    fitted: list[int] = []
    cands = sorted({_round(z, grain) for z in w if _round(z, grain) <= top} - set(base))
    while len(fitted) < classes and cands:
        if live and cur <= waste_permille / 1000.0 * live:
            break
        best, gain = 0, 0.0
        for c in cands:
            i = bisect.bisect_left(table, c)
            lo = table[i - 1] if i else 0
            g = (table[i] - c) * between(lo, c)
            if g > gain:
                best, gain = c, g
        if not best or gain < MIN_GAIN:
            break
        fitted.append(best)
        bisect.insort(table, best)
        cands.remove(best)
        cur -= gain
    fitted.sort()
    if not fitted:
        note = (f"generic classes: their rounding is already within the bound "
                f"({before / max(live, 1) * 1000:.1f} per mille of the live bytes at the peak)"
                if before <= waste_permille / 1000.0 * max(live, 1)
                else "generic classes: no class would save half a page at the peak")
    else:
        note = (f"{len(fitted)} fitted classes ({', '.join(map(str, fitted))}): rounding above "
                f"{grain} bytes at the peak {before / 1024:.0f} KiB -> {cur / 1024:.0f} KiB "
                f"of {live / 1048576:.1f} MiB live in small sizes")
    return Fit(fitted, note, before, cur, live)


def breakdown(prof: Profile, classes: list[int], grain: int = GRAIN) -> dict:
    """Where the small blocks' bytes at the peak go under a class table: requested, the
    rounding to the grain (no class of grain-aligned blocks saves it) and the rounding above."""
    req = r16 = cls = 0
    for z, (_, live) in prof.sizes.items():
        if live and z <= classes[-1]:
            req += z * live
            r16 += (_round(z, grain) - z) * live
            cls += (_class_of(classes, z) - _round(z, grain)) * live
    return {"requested": req, "round16": r16, "class_rounding": cls,
            "blocks_bytes": req + r16 + cls}


def main(argv=None) -> int:
    """python -m hctune.trace.fitted [--waste PERMILLE] [--classes N] [--grain 8|16] TRACE...:
    the note on stderr, the table as KNOB=VALUE words on stdout (for `--set`)."""
    ap = argparse.ArgumentParser(prog="python -m hctune.trace.fitted",
                                 description="Size classes fitted to the traces' sizes.")
    ap.add_argument("--waste", type=int, default=0, help="waste bound, per mille (default 0)")
    ap.add_argument("--classes", type=int, default=FIT_MAX, help=f"at most (<= {FIT_MAX})")
    ap.add_argument("--grain", type=int, default=GRAIN, help="16, or 8 (with FIT_ALIGN8=1)")
    ap.add_argument("traces", nargs="+")
    args = ap.parse_args(argv)
    try:
        fit = derive(profile(args.traces), args.waste, args.classes, grain=args.grain)
    except HctuneError as e:
        print(f"hctune: error: {e}", file=sys.stderr)
        return 2
    print(fit.note, file=sys.stderr)
    words = (["FIT_ALIGN8=1"] if args.grain == 8 and fit.table else []) + \
        [f"{k}={v}" for k, v in fit.knobs().items() if v]
    print(" ".join(words))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
