"""The provenance text of the emitted malloc.c from a stored validation (reading them back:
`hctune.realruns`)."""

from __future__ import annotations

from hctune import text
from hctune.realruns import winner_entry


def _fmt_measure(m, v):
    if v is None:
        return "-"
    return f"{v / 1024:,.0f} KiB" if m == "peak_rss_bytes" else f"{v:.3f} s"


def provenance(summary: dict, candidate: str | None = None) -> dict:
    """The real-run evidence for the emitted malloc.c's header: the winner's (HC's), or
    `candidate`'s (emit --env: the recommendation, which can be another allocator)."""
    w = winner_entry(summary) if candidate is None else next(
        (e for e in summary["candidates"] if e["candidate"] == candidate), None)
    prog = summary["program"]
    out = {"validated": f"{summary['runs']} interleaved real runs per candidate on "
                        f"{summary['date']} (validation #{summary['validation_id']}), output "
                        f"checked: {summary['output_check']}",
           "program": text.command(prog["argv"], prog["stdin"]) + f" (in {prog['cwd']})"}
    if w is not None:
        def line(e):
            parts = [f"{m} {_fmt_measure(m, e['median'][m])} (CI "
                     f"{_fmt_measure(m, e['ci'][m][0])}–{_fmt_measure(m, e['ci'][m][1])})"
                     for m in ("wall_s", "peak_rss_bytes")]
            return f"{e['candidate']}: median " + ", ".join(parts)
        out["real runs"] = "; ".join(line(e) for e in summary["candidates"]
                                     if e["candidate"] in (w["candidate"], "hc generic", "glibc"))
        ratios = []
        for key, who in (("vs_generic", "generic HC"), ("vs_glibc", "glibc")):
            for m in ("wall_s", "peak_rss_bytes"):
                r = w[key].get(m)
                if r:
                    ratios.append(f"{m} {r['ratio']:.3f}x {who} (CI {r['ci'][0]:.3f}–"
                                  f"{r['ci'][1]:.3f})")
        out["real ratios"] = "; ".join(ratios) or "-"
    out["verdict"] = summary["verdict"]
    return out
