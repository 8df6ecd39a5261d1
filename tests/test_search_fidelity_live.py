"""The part for peak memory reaches the trace's peak of live bytes (issue 37; search/fidelity.py,
MARKERS: "live" for HC's footprint): where the peak is (hctrace-tool and the Python definition agree, remembered per
process), the part each trace gets from it, the fall-back to glibc's RSS peak, and a study whose
trace is a real file gets its part from the live peak (a cost model stands in for the harness,
as in test_search_fidelity.py)."""

import pytest

from hctune.db import Database
from hctune.search import fidelity, study
from hctune.trace import fitted
from hctune.trace.writer import Writer
from test_search_fidelity import HC, OPS, Model


def _trace(path, before=300, peak=500, after=900):
    """`before` blocks allocated and freed, then `peak` live at once (the peak of live bytes at
    event 2 * before + peak), then `after` small blocks allocated and freed one by one."""
    with Writer(path, command="live-peak-test") as w:
        for i in range(before):
            w.malloc(0x10000 + 0x100 * i, 64)
        for i in range(before):
            w.free(0x10000 + 0x100 * i)
        for i in range(peak):
            w.malloc(0x100000 + 0x1000 * i, 1000)
        for i in range(peak):
            w.free(0x100000 + 0x1000 * i)
        for i in range(after):
            w.malloc(0x900000, 16)
            w.free(0x900000)
    return path


def test_where_the_live_peak_is(tmp_path, monkeypatch):
    path = _trace(tmp_path / "a.hct")
    events = 2 * 300 + 2 * 500 + 2 * 900
    assert fitted.live_peak(path, use_tool=False) == (events, 600 + 500)
    fitted._PEAKS.clear()
    assert fitted.live_peak(path) == (events, 1100)          # hctrace-tool's first pass
    stand_in = tmp_path / "stand-in.hct"
    stand_in.write_bytes(b"not a trace")
    # a trace it cannot read is left out (plan() then uses glibc's peak for it)
    assert fidelity.live_peaks({7: path, 8: stand_in, 9: tmp_path / "missing.hct"}) == {
        7: (events, 1100)}

    def no_more(*a, **k):
        raise AssertionError("the trace was read again")
    monkeypatch.setattr(fitted, "_profile_one", no_more)
    assert fitted.live_peak(path) == (events, 1100)          # remembered for the process


def test_the_part_from_the_live_peak():
    base = {1: {"ops": 4_000_000, "peak_rss_sample_op": 3_900_000}}     # glibc peaks late
    margin = int(4_000_000 * fidelity.PEAK_MARGIN)
    p = fidelity.plan("mem", "footprint_bytes", base, live={1: (2_000_000, 500_001)})
    # events and ops nearly one to one: the event's share of the ops, rounded up
    assert p.parts == {1: 1_000_002 + margin}
    assert p.what == "the prefix through the peak of live bytes"
    # peak RSS keeps glibc's peak (the live-peak part ranked it at rho 0.76 on jq's trace)
    assert "glibc's RSS" in fidelity.plan("mem", "peak_rss_bytes", base,
                                          live={1: (2_000_000, 500_001)}).note
    late = fidelity.plan("mem", "footprint_bytes", base, live={1: (2_000_000, 1_500_000)})
    assert late.parts is None and "peak of live bytes comes 75%" in late.note
    # a trace whose live peak is unknown: glibc's peak (here too late: whole-trace trials)
    assert "glibc's RSS" in fidelity.plan("mem", "footprint_bytes", base, live={}).note
    early = {1: {"ops": 4_000_000, "peak_rss_sample_op": 400_000}}
    assert fidelity.plan("mem", "footprint_bytes", early).what == "the prefix through glibc's peak"
    # neither the mean RSS nor time take a part from it
    assert fidelity.plan("mem", "mean_rss_bytes", base, live={1: (2_000_000, 1)}).parts is None
    assert fidelity.plan("perf", "footprint_bytes", base, live={1: (2_000_000, 1)}).parts is None


def test_marker_glibc_ignores_the_live_peak():
    early = {1: {"ops": 4_000_000, "peak_rss_sample_op": 400_000}}
    p = fidelity.plan("mem", "peak_rss_bytes", early, live={1: (4_000_000, 1_000_000)})
    assert p.parts == {1: 400_000 + int(4_000_000 * fidelity.PEAK_MARGIN)}
    assert p.what == "the prefix through glibc's peak"


@pytest.mark.parametrize("objective, parts", [("mem", True), ("perf", False)])
def test_a_study_of_a_real_trace_takes_its_part_from_the_live_peak(tmp_path, objective, parts):
    """The model says the trace has OPS ops and glibc peaks at a tenth of them; the file's live
    peak is at 1100 of its 3400 events, so the part reaches a third of the ops instead."""
    trace = _trace(tmp_path / "t.hct")
    db = tmp_path / "h.db"
    with Database(db) as d:
        d.add_trace(trace, "34" * 32, command="app", events=3400)
    r = study.run(db, (), study.Options(allocators=HC, trials=6, seed=3, objective=objective),
                  measure_fn=Model())
    if parts:
        at = -(-1100 * OPS // 3400)
        assert r["fidelity"]["parts"] == {"1": at + int(OPS * fidelity.PEAK_MARGIN)}
        assert r["fidelity"]["what"] == "the prefix through the peak of live bytes"
    else:
        assert r["fidelity"]["parts"] is None
    assert r["finished"] + r["trials"]["pruned"] == 6
