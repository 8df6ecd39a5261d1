"""Hasan & Chang 2006, Tables 8 and 9 for one trace: the memory and the time of each allocator,
absolute and normalised to glibc (the paper normalised to DL272, glibc's ancestor).

Measurements are interleaved — round 1 runs A, B, C, round 2 runs A, B, C again, and so on — so
that drift of a shared machine (other jobs, frequency changes) hits every allocator alike; each
figure is the median over rounds of the in-process median over repeats.
"""

from __future__ import annotations

import statistics

from hctune import allocator_knobs, allocators, knobs, replay
from hctune.errors import HctuneError

DEFAULT_ALLOCATORS = ("glibc", "jemalloc", "mimalloc", "tcmalloc", "kingsley")
DEFAULT_PRESETS = ("generic",)


def entries(allocator_names, preset_names, optional=(), skipped=None, sets=()) -> list[dict]:
    """What to measure: one entry per baseline allocator, one per HC preset, and one per
    allocator named in `sets` (`jemalloc.dirty_decay_ms=0`: that allocator with its knobs,
    configs/allocators.toml).  Every name is checked (and every HC setting built) before
    anything is measured.  A name in `optional` whose library is not installed is left out,
    its reason appended to `skipped`."""
    out = []
    for name in allocator_names:
        if not allocators.of(name).is_defaults(None):    # HC: no setting is no build
            raise HctuneError("name HC settings with --presets, not in --allocators")
        try:
            alloc = allocators.resolve(name)
        except HctuneError as e:
            if name not in optional:
                raise
            if skipped is not None:
                skipped.append(f"{name} left out: {e}")
            continue
        out.append({"label": name, "allocator": name, "setting": None, "alloc": alloc})
    for p in preset_names:
        setting = knobs.preset(p)
        out.append({"label": f"hc:{p}", "allocator": "hc", "preset": p, "setting": setting,
                    "alloc": allocators.resolve("hc", setting)})
    by_alloc: dict[str, list[str]] = {}
    for item in sets:
        by_alloc.setdefault(item.partition(".")[0].strip(), []).append(item)
    for name, items in by_alloc.items():
        if name not in allocator_knobs.names():
            raise HctuneError(f"--set {items[0]}: name one of "
                              f"{', '.join(allocator_knobs.names())} before the dot "
                              f"(jemalloc.narenas=1)")
        setting = allocator_knobs.parse_sets(name, items)
        out.append({"label": f"{name} {allocator_knobs.key(name, setting)}", "allocator": name,
                    "setting": setting, "alloc": allocators.resolve(name, setting)})
    if not out:
        raise HctuneError("nothing to compare: give --allocators and/or --presets")
    return out


def compare(trace, allocator_names=DEFAULT_ALLOCATORS, preset_names=DEFAULT_PRESETS,
            rounds: int = 5, repeat: int = 3, timeout: float | None = replay.DEFAULT_TIMEOUT,
            progress=None, on_result=None, threads: str = "auto", optional=(),
            sets=()) -> dict:
    """Measure every entry `rounds` times, interleaved; `progress(done, total, label)` is called
    after each run, `on_result(entry, result)` for every single measurement."""
    if not isinstance(rounds, int) or rounds < 1:
        raise HctuneError(f"--repeat (rounds) must be at least 1, not {rounds!r}")
    skipped: list[str] = []
    todo = entries(allocator_names, preset_names, optional, skipped, sets)
    runs = {e["label"]: [] for e in todo}
    total, done = rounds * len(todo), 0
    for _ in range(rounds):
        for e in todo:
            r = replay.measure(trace, e["allocator"], e["setting"], repeat=repeat,
                               timeout=timeout, threads=threads)
            runs[e["label"]].append(r)
            if on_result:
                on_result(e, r)
            done += 1
            if progress:
                progress(done, total, e["label"])
    rows = [summarise(e, runs[e["label"]]) for e in todo]
    base = next((r for r in rows if r["label"] == "glibc"), rows[0])
    for r in rows:
        r["time_norm"] = r["time_ns_per_op"] / base["time_ns_per_op"] \
            if base["time_ns_per_op"] else None
        r["memory_norm"] = r["peak_rss_bytes"] / base["peak_rss_bytes"] \
            if base["peak_rss_bytes"] else None
    first = runs[todo[0]["label"]][0]
    return {"trace": str(trace), "command": first.get("command"), "ops": first["ops"],
            "max_live_bytes": first["max_live_bytes"], "rounds": rounds, "repeat": repeat,
            "threads": first.get("threads", 1), "replay_threads": first.get("replay_threads", 1),
            "baseline": base["label"], "rows": rows, "skipped": skipped}


def summarise(entry: dict, results: list[dict]) -> dict:
    """Medians over rounds of one entry's measurements."""
    times = [r["time_ns_per_op"] for r in results]
    rss = [r["peak_rss_bytes"] for r in results if r["peak_rss_bytes"] is not None]
    hc = [r["hc_footprint_bytes"] for r in results if r.get("hc_footprint_bytes") is not None]
    live = results[0]["max_live_bytes"]
    peak = statistics.median(rss) if rss else None
    return {
        "label": entry["label"],
        "allocator": entry["allocator"],
        "preset": entry.get("preset"),
        "setting": allocators.setting_key(entry["allocator"], entry["setting"]),
        "library": str(entry["alloc"].library) if entry["alloc"].library else None,
        "time_ns_per_op": statistics.median(times),
        "times_ns_per_op": times,
        "spread": max(times) / min(times) - 1 if min(times) > 0 else None,
        "peak_rss_bytes": peak,
        "hc_footprint_bytes": statistics.median(hc) if hc else None,
        "fragmentation": (statistics.median(hc) if hc else peak) / live - 1
        if live and (hc or peak is not None) else None,
    }


def table(result: dict):
    """A Rich table: Tables 8 and 9 side by side.  RSS: peak resident memory over the baseline
    (every allocator); HC KiB: HC's own footprint; frag: footprint (HC's own, else RSS) / max
    live - 1."""
    from rich.table import Table  # deferred: rich, only when a table is printed

    base = result["baseline"]
    t = Table(title=f"{result['trace']} — {result['ops']:,} ops, max live "
                    f"{result['max_live_bytes'] / 1024:,.0f} KiB, {result['rounds']} rounds "
                    f"interleaved, medians{_threads_note(result)}",
              title_justify="left")
    t.add_column("allocator", overflow="fold")
    t.add_column("ns/op", justify="right", overflow="fold")
    t.add_column(f"×{base}", justify="right", overflow="fold")
    t.add_column("spread", justify="right", overflow="fold")
    t.add_column("RSS KiB", justify="right", overflow="fold")
    t.add_column(f"×{base}", justify="right", overflow="fold")
    t.add_column("HC KiB", justify="right", overflow="fold")
    t.add_column("frag", justify="right", overflow="fold")
    for r in result["rows"]:
        t.add_row(
            r["label"],
            f"{r['time_ns_per_op']:.1f}",
            _fmt(r["time_norm"]),
            f"{r['spread'] * 100:.0f}%" if r["spread"] is not None else "",
            f"{r['peak_rss_bytes'] / 1024:,.0f}" if r["peak_rss_bytes"] is not None else "—",
            _fmt(r["memory_norm"]),
            f"{r['hc_footprint_bytes'] / 1024:,.0f}" if r["hc_footprint_bytes"] else "—",
            f"{r['fragmentation']:.2f}" if r["fragmentation"] is not None else "—",
        )
    return t


def _threads_note(result: dict) -> str:
    n, on = result.get("threads", 1), result.get("replay_threads", 1)
    if on > 1:
        return f"; {n} threads replayed on {on} (ns/op of wall time)"
    if n > 1:
        return f"; {n} threads replayed on one"
    return ""


def _fmt(x):
    return f"{x:.2f}" if x is not None else "—"
