"""Multi-fidelity trials (issue 37): a setting is replayed on a part of each trace first, and
only the promising ones on the whole.

The part is a prefix (hcreplay --ops: the rest of the trace is not even read), chosen per
objective from what it must contain:
  * peak memory (footprint, peak RSS): the prefix through the trace's peak of live bytes
    ("live": the first event at which the requested bytes live at once are most, which the
    trace says exactly; HC's footprint is a high-water mark of what live blocks need, so it
    reaches most of its height by then) or through glibc's peak ("glibc": the op at which the
    baseline's RSS curve was highest), per field in MARKERS, plus a margin, since a part without
    the peak says nothing about it; when the peak comes late in the trace the part would save
    too little and every trial replays the whole trace. A trace the live peak cannot be read
    from (a stand-in in tests) falls back to glibc's peak;
  * time (perf): whole-trace trials. The registered rule (docs/lab/search-registration.md) uses a
    part for an objective only where it ranks settings as the whole does with Spearman's rho of
    0.8 or more; the first quarter of a python3 trace ranked time per op at 0.65 (25 settings,
    load average 12-16 on 2 cores; bench/search_fidelity.py), so TIME_PART is None until a
    quieter measurement says otherwise (peak memory: 0.998 through the peak);
  * mean or final RSS, pareto studies: whole-trace trials (the final RSS needs the end, and
    Optuna's pruners are single-objective).
Which trials go on to the whole trace is Optuna's successive halving (SuccessiveHalvingPruner,
one rung: the part's value reported at step 1, the best third go on); the seeds are replayed on
the part too (they are the rung's first competitors) but always go on. Every knob the space has
(configs/knobs.toml, including ones added later) is measured the same way at both fidelities:
the part is a part of the trace, not of the setting.
"""

from __future__ import annotations

import dataclasses

from hctune.errors import HctuneError
from hctune.search import objective as _obj
from hctune.trace import fitted as _fitted

MIN_PART_OPS = 200_000    # a trace of fewer ops is replayed whole: a part would save little
# a part longer than this share of the trace saves too little: with a third going on to the
# whole, a trial costs the part plus a third of the whole
MAX_PART_SHARE = 0.5
# perf's part (a share of the ops), or None: whole-trace trials (see above)
TIME_PART = None
TIME_RHO = "0.65 for the first quarter of a python3 trace under load (bench/search_fidelity.py)"
PEAK_MARGIN = 1 / 64      # past the peak (glibc's RSS curve has ~128 samples)
# the peak a memory part reaches, per field: "live" (the trace's peak of live bytes) or "glibc"
# (glibc's RSS). Measured (docs/search.md, bench/search_fidelity.py on jq, lua5.4 and python3
# traces of 12-24 M events): the live-peak prefix ranks HC's footprint at rho 0.85, 1.00, 0.97
# (the registered bar: 0.8 on each), but peak RSS at 0.76 on jq's, so peak RSS keeps glibc's peak
MARKERS = {_obj.MEM_FIELD: "live", _obj.RSS_FIELD: "glibc"}
PART_STEP = 1             # the step the part's value is reported at
REDUCTION = 3             # successive halving's reduction factor: a third go on


@dataclasses.dataclass
class Plan:
    parts: dict[int, int] | None      # trace id -> ops of its part; None: whole-trace trials
    what: str                         # the part, in words
    note: str | None = None           # why trials are whole-trace, when they are

    def as_dict(self) -> dict:
        return {"parts": {str(k): v for k, v in (self.parts or {}).items()} or None,
                "what": self.what, "note": self.note}


def whole(note: str | None = None) -> Plan:
    return Plan(None, "the whole trace", note)


def live_peaks(paths: dict) -> dict[int, tuple[int, int]]:
    """{trace id: (events, the first event at which live bytes peak)} of the traces given as
    {trace id: path} (hctrace-tool's two passes over each); a trace it cannot read is left out
    (plan() then uses glibc's peak for it)."""
    out = {}
    for tid, path in paths.items():
        try:
            events, at = _fitted.live_peak(path)
        except (HctuneError, OSError, ValueError, KeyError):
            continue
        if events > 0 and 0 < at <= events:
            out[tid] = (events, at)
    return out


def peak_op(base: dict, live: tuple[int, int] | None,
            mem_field: str = _obj.MEM_FIELD) -> tuple[int | None, str]:
    """The op a part of one trace must reach for the peak of `mem_field`, and which peak that
    is."""
    ops = base.get("ops")
    if MARKERS.get(mem_field) == "live" and live is not None and isinstance(ops, int):
        events, at = live
        return -(-at * ops // events), "live"      # events and ops are nearly one to one
    at = base.get("peak_rss_sample_op")
    return (at if isinstance(at, int) and at > 0 else None), "glibc"


def plan(objective: str, mem_field: str, baselines: dict, enabled: bool = True,
         live: dict | None = None) -> Plan:
    """The parts of the study's traces ({trace id: glibc's measurement of it}) its trials are
    replayed on first; live: live_peaks() of them."""
    if not enabled:
        return whole()
    if objective == "pareto":
        return whole("a pareto study's trials replay the whole trace (Optuna's pruners are "
                     "single-objective)")
    if objective == "mem" and mem_field not in (_obj.MEM_FIELD, _obj.RSS_FIELD):
        return whole("the mean and final RSS need the whole trace: every trial replays it")
    parts, peaks = {}, set()
    for tid, base in baselines.items():
        ops = base.get("ops")
        if not isinstance(ops, int) or ops <= 0:
            return whole()          # a stand-in measurement (tests) or an unknown trace
        if ops < MIN_PART_OPS:
            return whole(f"trace #{tid} has {ops:,} ops, fewer than the {MIN_PART_OPS:,} a "
                         "part needs: every trial replays the whole trace")
        if objective == "mem":
            at, which = peak_op(base, (live or {}).get(tid), mem_field)
            if at is None:
                return whole(f"trace #{tid}'s baseline does not say where its peak is (an "
                             "older harness): every trial replays the whole trace")
            peaks.add(which)
            part = at + int(ops * PEAK_MARGIN)
            if part > ops * MAX_PART_SHARE:
                what = "peak of live bytes" if which == "live" else "peak (glibc's RSS)"
                return whole(f"trace #{tid}'s {what} comes {at / ops:.0%} of the way "
                             "through: a part reaching it saves too little, every trial "
                             "replays the whole trace")
        elif TIME_PART is None:
            return whole(f"perf trials replay the whole trace: a part ranked time per op at "
                         f"rho {TIME_RHO}, below the 0.8 a part needs")
        else:
            part = int(ops * TIME_PART)
        parts[tid] = max(1, part)
    what = (("the prefix through the peak of live bytes" if peaks == {"live"} else
             "the prefix through glibc's peak" if peaks == {"glibc"} else
             "the prefix through the peak (of live bytes, or glibc's RSS)")
            if objective == "mem" else f"the first {TIME_PART:.0%} of the trace")
    return Plan(parts, what)


def pruner():
    """Successive halving over one rung (the part), the best 1/REDUCTION going on."""
    import optuna   # deferred: optuna is heavy (plan() is used without it)
    return optuna.pruners.SuccessiveHalvingPruner(min_resource=PART_STEP,
                                                  reduction_factor=REDUCTION,
                                                  min_early_stopping_rate=0)
