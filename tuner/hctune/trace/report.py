"""Text and HTML renderings of a trace's statistics (hctune stats)."""

from __future__ import annotations

import json

from hctune import __version__, templating
from hctune import text as _text


def rows(st: dict) -> list[tuple[str, str]]:
    """(label, value) pairs: Hasan & Chang 2006 Tables 1, 3, 4 for one program."""
    f = "{:,}".format
    a = st["anomalies"]
    return [
        ("distinct sizes (Table 1)", f(st["distinct_sizes"])),
        ("allocations (Table 4)", f(st["allocations"])),
        ("requests (allocations + reallocs)", f(st["requests"])),
        ("  small / large", f"{f(st['small_requests'])} / {f(st['large_requests'])}"),
        ("% requests ≤ 1 KiB", f"{st['pct_small_requests']:.2f}"),
        ("bytes requested (Table 3)", f(st["bytes_requested"])),
        ("  small / large", f"{f(st['small_bytes'])} / {f(st['large_bytes'])}"),
        ("max live bytes (Table 3)", f(st["max_live_bytes"])),
        ("  small / large", f"{f(st['max_live_small_bytes'])} / {f(st['max_live_large_bytes'])}"),
        *([("mean live bytes (headroom: weighted by " + st.get("mean_live_weight", "events")
            + ")", f(st["mean_live_bytes"]))] if "mean_live_bytes" in st else []),
        ("max live objects (Table 4)", f(st["max_live_objects"])),
        ("  small / large",
         f"{f(st['max_live_small_objects'])} / {f(st['max_live_large_objects'])}"),
        ("reallocs", f(st["reallocs"])),
        ("frees", f(st["frees"])),
        ("live at exit (bytes / objects)",
         f"{f(st['final_live_bytes'])} / {f(st['final_live_objects'])}"),
        ("anomalies (unknown free / unknown realloc / reused live address)",
         f"{a['free_unknown']} / {a['realloc_unknown']} / {a['alloc_live']}"),
    ]


def text(st: dict, name: str) -> str:
    out = [f"{name}: {st['events']:,} events, {st['threads']} thread(s), "
           f"command: {_text.command(st['command'])}"]
    width = max(len(label) for label, _ in rows(st))
    out += [f"  {label:<{width}}  {value}" for label, value in rows(st)]
    out.append("  size histogram (requests ≤ size):")
    for b in st["histogram"]:
        if b["count"]:
            out.append(f"    ≤{b['max_size']:>10}  {b['count']:>12,}  {b['bytes']:>15,} bytes")
    return "\n".join(out)


def html(st: dict, name: str) -> str:
    from hctune.trace.plots import png_data_uri   # matplotlib: only when a page is made
    return templating.render("stats.html.j2", trace_name=name, stats=st, rows=rows(st),
                             png=png_data_uri(st), version=__version__,
                             stats_json=json.dumps(st, sort_keys=True).replace("</", "<\\/"))
