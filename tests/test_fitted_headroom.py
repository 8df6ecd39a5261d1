"""Headroom (issue 36): `hctune stats`' mean live bytes beside the peak, and validate's
peak_rss_over_live with the verdict's distance from the limit."""

from hctune import validate as _validate
from hctune.trace.stats import compute, stats
from hctune.trace.reader import open_trace
from hctune.trace.writer import Writer
from test_validate_rule import cand, runs_for


def test_mean_live_bytes_event_and_time_weighted(tmp_path):
    """100 then 300 live bytes: event-weighted over 4 events; time-weighted by how long each
    level lasted; the C tool and the Python definition agree."""
    for timed in (False, True):
        path = tmp_path / f"t{timed}.hct"
        with Writer(path, command="headroom", timed=timed) as w:
            w.malloc(0x1000, 100, time_ns=10)
            w.malloc(0x2000, 200, time_ns=20)
            w.free(0x1000, time_ns=110)
            w.free(0x2000, time_ns=130)
        py = compute(open_trace(path))
        tool = stats(path)
        assert py["max_live_bytes"] == 300
        if timed:   # 100 B for 10 ns, 300 for 90, 200 for 20, over 130 ns
            assert py["mean_live_weight"] == "time"
            assert py["mean_live_bytes"] == (100 * 10 + 300 * 90 + 200 * 20) // 130
        else:       # after each event: 100, 300, 200, 0
            assert py["mean_live_weight"] == "events"
            assert py["mean_live_bytes"] == 600 // 4
        assert (tool["mean_live_bytes"], tool["mean_live_weight"]) == \
            (py["mean_live_bytes"], py["mean_live_weight"])


def test_peak_rss_over_live_and_the_verdict():
    cands = [cand("tuned #1", "tuned"), cand("hc generic", "generic"), cand("glibc")]
    s = _validate.summarize(cands, runs_for({"tuned #1": (10.0, 1000), "hc generic": (10.0, 1100),
                                             "glibc": (10.0, 1200)}), "mem")
    before = s["verdict"]
    rss = {e["candidate"]: e["median"]["peak_rss_bytes"] for e in s["candidates"]}
    _validate.add_headroom(s, 500_000)
    for e in s["candidates"]:
        assert e["peak_rss_over_live"] == round(rss[e["candidate"]] / 500_000, 4)
    assert s["max_live_bytes"] == 500_000
    assert s["verdict"].startswith(before + "; its peak RSS is ")
    assert "x your program's peak live data: at most" in s["verdict"]
    # no trace statistics: the summary is left as it was
    t = _validate.summarize(cands, runs_for({"tuned #1": (10.0, 1000), "hc generic": (10.0, 1100),
                                             "glibc": (10.0, 1200)}), "mem")
    v = t["verdict"]
    _validate.add_headroom(t, None)
    assert t["verdict"] == v and "peak_rss_over_live" not in t["candidates"][0]
