"""Plots of a trace's statistics: the size histogram and the allocation graph (live bytes over
time, as Hasan & Chang 2006 Fig. 5).  matplotlib without a display; files written atomically."""

from __future__ import annotations

import base64
import io

import matplotlib


matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def _size_label(n: int) -> str:
    for unit, div in (("M", 1 << 20), ("K", 1 << 10)):
        if n >= div:
            return f"{n // div}{unit}"
    return str(n)


def figure(st: dict):
    fig, (hist, graph) = plt.subplots(1, 2, figsize=(11, 3.8))
    bins = st["histogram"]
    hist.bar(range(len(bins)), [b["count"] for b in bins], color="#4a7ab5")
    hist.set_xticks(range(len(bins)), [f"≤{_size_label(b['max_size'])}" for b in bins],
                    rotation=60, fontsize=7)
    hist.set_yscale("log" if any(b["count"] > 0 for b in bins) else "linear")
    hist.set_title("requests by size")
    hist.set_ylabel("requests")
    g = st["graph"]
    timed = any(g["time_ns"])
    xs = [t / 1e9 for t in g["time_ns"]] if timed else g["event"]
    graph.plot(xs, [v / 1024 for v in g["live_bytes"]], color="#b5524a", lw=1)
    graph.set_title("allocation graph: live memory")
    graph.set_xlabel("seconds" if timed else "events")
    graph.set_ylabel("live KiB")
    fig.tight_layout()
    return fig


def png_bytes(st: dict) -> bytes:
    buf = io.BytesIO()
    fig = figure(st)
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    return buf.getvalue()


def png_data_uri(st: dict) -> str:
    return "data:image/png;base64," + base64.b64encode(png_bytes(st)).decode()


