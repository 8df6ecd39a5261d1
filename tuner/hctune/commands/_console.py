"""The Rich side of the commands, in one place: the validation's table and verdict, its progress
(a bar on a terminal, a line per round in a pipe). The commands (validate, search --validate,
best) stay thin and share these; nothing here decides anything."""

from __future__ import annotations

import textwrap
import time

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from hctune import allocators, text
from hctune.validate.stats import CURVE_MEASURES


def _size(n) -> str:
    if n is None:
        return "-"
    for unit in ("B", "KiB", "MiB"):
        if n < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def _ratio(r):
    """Two short lines: the ratio (* = significant) and its 95 % interval."""
    if not r:
        return "-"
    star = "*" if r["ci"][1] < 1 or r["ci"][0] > 1 else ""
    return f"{r['ratio']:.2f}{star}\n{r['ci'][0]:.2f}–{r['ci'][1]:.2f}"


def _status(e, s):
    if e["disqualified"]:
        return "out"
    rec = (s.get("recommendation") or {}).get("candidate")
    win = (s.get("winner") or {}).get("candidate")
    if e["candidate"] == rec:
        return "use" + ("\nemitted" if e["candidate"] == win else "")
    return "emitted" if e["candidate"] == win else "ok"


def table(s: dict) -> Table:
    """A layout that fits 80 columns (every cell at most 10 characters a line; a longer label
    folds, never clips): ratios and their intervals on two lines."""
    t = Table(box=box.SIMPLE_HEAD, padding=(0, 1), collapse_padding=True, pad_edge=False)
    # mem's measure: the peak RSS, or the mean or final RSS of the runs' curve
    mem = s.get("measure") if s.get("measure") in CURVE_MEASURES else "peak_rss_bytes"
    rss = {"rss_mean_bytes": "RSS\nmean", "rss_final_bytes": "RSS\nfinal"}.get(mem, "RSS")
    # perf's time: the wall time, or with --time-measure cpu the program's CPU time
    tm, tw = ("cpu_s", "CPU") if s.get("measure") == "cpu_s" else ("wall_s", "wall")
    for col in ("candidate", f"{tw} s", f"{tw}/\ngeneric", f"{tw}/\nglibc", rss, "RSS/\nglibc",
                "replay\nt, mem", "status"):
        t.add_column(col, justify="left" if col in ("candidate", "status") else "right",
                     overflow="fold")
    chosen = (s.get("recommendation") or s.get("winner") or {}).get("candidate")
    for e in s["candidates"]:
        rp, med = e.get("replay"), e["median"]
        t.add_row(("[bold]" if e["candidate"] == chosen else "") + escape(e["candidate"]),
                  "-" if med.get(tm) is None else f"{med[tm]:.3f}",
                  _ratio(e["vs_generic"].get(tm)), _ratio(e["vs_glibc"].get(tm)),
                  _size(med.get(mem)),
                  _ratio(e["vs_glibc"].get(mem)),
                  f"{rp['perf_ratio']:.2f}\n{rp['mem_ratio']:.2f}" if rp else "-",
                  _status(e, s))
    return t


def show(s: dict, console: Console):
    prog = text.command(s["program"]["argv"], s["program"]["stdin"])
    console.print(escape(f"study {s['study']} ({s['objective']}); program: {prog}"))
    if s["program"].get("server"):
        console.print(escape(f"a server, under its load: {s['program']['server']['load']} "
                             "(wall = the load's time; RSS = all its processes, every 100 ms)"))
    console.print(f"{s['runs']} interleaved runs each; medians; ratios over 95 % CI (paired "
                  "bootstrap), * = significant; replay = the search's prediction vs glibc "
                  "(time, footprint); use = recommended, emitted = what emit writes")
    console.print(table(s))
    if s.get("max_live_bytes"):   # the physical limit (docs/profile-guided.md)
        ratios = ", ".join(f"{e['candidate']} {e['peak_rss_over_live']:.2f}x"
                           for e in s["candidates"] if e.get("peak_rss_over_live"))
        console.print(escape(f"peak RSS over the trace's peak live bytes "
                             f"({s['max_live_bytes'] / 1048576:,.1f} MiB): {ratios}"))
    for e in s["candidates"]:
        if e["disqualified"]:
            console.print(escape(f"out: {e['candidate']}: {e['disqualified']}"))
    for n in s["notes"]:
        console.print(escape(f"note: {n}"))
    console.print(escape(f"verdict: {s['verdict']}"), style="bold")


def _duration(seconds: float) -> str:
    m, s = divmod(int(round(seconds)), 60)
    return f"{m} min {s:02d} s" if m else f"{s} s"


def plan_line(ev) -> str | None:
    """The plan before the first run, and the estimate once the warm-up has been timed."""
    if ev["event"] == "plan":
        n = len(ev["candidates"])
        return (f"validate: plan: {n} candidates ({', '.join(ev['candidates'])}) x "
                f"{ev['rounds']} rounds = {n * ev['rounds']} runs, after {ev['warmups']} "
                "warm-up runs on glibc (its output is the reference); warming up...")
    if ev["event"] == "warmup":
        return (f"validate: warm-up run took {ev['seconds']:.2f} s: about "
                f"{_duration(ev['seconds'] * (ev['runs'] + 1))} for the rest "
                f"({ev['runs']} runs and the second warm-up)")
    return None


class _Lines:
    """Progress without a terminal (a pipe, a file, a CI log): one plain line per finished
    round, flushed, instead of a bar nobody sees."""

    def __init__(self, console: Console):
        self.console, self.t0 = console, time.monotonic()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def _say(self, text: str) -> None:
        # a line a log can grep: Rich would fold it at the pipe's 80 columns
        self.console.print(text, soft_wrap=True)

    def __call__(self, ev):
        if plan_line(ev):
            self._say(escape(plan_line(ev)))
        elif ev["event"] == "build":
            self._say(escape(f"validate: building {ev['candidate']}"))
        elif ev["event"] == "run" and ev["run"].get("problem"):
            self._say(escape(f"validate: run {ev['done']}/{ev['total']} "
                             f"{ev['candidate']} disqualified: {ev['run']['problem']}"))
        elif ev["event"] == "run":
            r = ev["run"]
            self._say(escape(
                f"validate: run {ev['done']}/{ev['total']} {ev['candidate']}: wall "
                f"{r['wall_s']:.3f} s, CPU {r['user_s'] + r['sys_s']:.3f} s, peak RSS "
                f"{_size(r['peak_rss_bytes'])}"))
        elif ev["event"] == "round":
            walls = sorted(r["wall_s"] for r in ev["rows"] if r.get("wall_s") is not None)
            self._say(
                f"validate: round {ev['done']}/{ev['total']} done ({len(ev['rows'])} runs, "
                + (f"wall {walls[0]:.3f}-{walls[-1]:.3f} s, " if walls else "")
                + f"{time.monotonic() - self.t0:.0f} s so far)")
        self.console.file.flush()


def progress_bar(console: Console):
    """(a context, callback for hctune.validate.validate's progress events): a rich bar on a
    terminal, plain lines (one per round) otherwise."""
    if not console.is_terminal:
        lines = _Lines(console)
        return lines, lines
    prog = Progress(TextColumn("[bold]validate[/]"), BarColumn(), MofNCompleteColumn(),
                    TextColumn("{task.fields[what]}"), TimeElapsedColumn(), console=console,
                    transient=True)
    task = prog.add_task("runs", total=None, what="")

    def progress(ev):
        if plan_line(ev):
            prog.console.print(escape(plan_line(ev)))
        elif ev["event"] == "build":
            prog.update(task, what=escape(f"building {ev['candidate']}"))
        elif ev["event"] == "run":
            prog.update(task, total=ev["total"], completed=ev["done"],
                        what=escape(ev["candidate"]))
            if ev["run"].get("problem"):
                prog.console.print(escape(f"{ev['candidate']} disqualified: "
                                          f"{ev['run']['problem']}"))
    return prog, progress


def setting_text(alloc: str, key: str | None) -> str:
    """A setting as what differs from generic (HC: Table 6 as the search measures it; another
    allocator: its library defaults), "K=V, K=V": short words a table wraps between, so a cell
    grows lines instead of clipping."""
    fam = allocators.of(alloc)
    if not key:
        return fam.no_setting_text
    pairs = dict(p.split("=", 1) for p in key.split(",") if "=" in p)

    def generic() -> dict:          # asked by HC's rows only
        from hctune import knobs as _knobs  # deferred: the knobs table
        from hctune.search import space     # deferred: Optuna (the search's fixed knobs)
        return space.for_search(_knobs.preset("generic"))
    return fam.setting_text(pairs, generic)


def setting_lines(alloc: str, key: str | None, indent: str = "  ", width: int = 80) -> str:
    """setting_text folded between its knobs at `width` columns, never clipped."""
    return textwrap.fill(setting_text(alloc, key), width=width, initial_indent=indent,
                         subsequent_indent=indent, break_on_hyphens=False,
                         break_long_words=False)
