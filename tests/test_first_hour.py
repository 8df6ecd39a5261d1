"""Issue 32's frictions of a first hour, each on the smallest input that shows it: an env file
that sources whatever the profiled command held, a generic answer said as such, one-line
commands, the two generic HC builds named apart, the load and wide-interval warnings, stats'
progress on a big trace, emit's absolute LD_PRELOAD path, settings shown whole as what differs
from generic."""

from __future__ import annotations

import io
import subprocess

from rich.console import Console

from hctune import emit, knobs, text
from hctune import validate as _validate
from hctune.search import space
from hctune.trace.stats import stats
from hctune.trace.writer import Writer
from hctune.validate import store

GAWK = ["gawk", "-F,", "BEGIN { n = 0 }\n{ s[$1] += $2 } # (sum)\nEND { for (k in s) print k }",
        "data.csv"]


def _summary(argv):
    return {"runs": 5, "date": "2026-12-06", "validation_id": 3, "output_check": "exit status",
            "program": {"argv": argv, "stdin": None, "cwd": "/tmp/x"}, "candidates": [],
            "verdict": "keep glibc: no allocator was significantly smaller on this program"}


def _source(env_file, command="echo sourced"):
    return subprocess.run(["bash", "-c", f'. "{env_file}" && {command}'], capture_output=True,
                          text=True, timeout=30)


def test_env_file_sources_with_a_multi_line_argv(tmp_path):
    """Item 1: the gawk program's second line used to land outside the `# program:` comment."""
    prov = store.provenance(_summary(GAWK), "glibc")
    assert "\n" not in prov["program"] and "[+2 lines]" in prov["program"]
    from types import SimpleNamespace
    prov["trace"] = emit._trace_text([SimpleNamespace(id=1, path="/t/gawk.hct",
                                                      command=" ".join(GAWK))], True)
    assert prov["trace"] == "#1 /t/gawk.hct (gawk -F, BEGIN { n = 0 } [+2 lines])"
    # whatever a value holds, every line of the header stays a comment
    prov["verdict"] = "line one\nline two (with a parenthesis)"
    f = tmp_path / "glibc.env"
    emit.write_env(f, "glibc", {}, prov)
    r = _source(f)
    assert r.returncode == 0 and r.stdout == "sourced\n" and r.stderr == "", r.stderr
    assert "# line two (with a parenthesis)" in f.read_text()


def test_env_file_of_a_generic_answer_does_not_say_tuned(tmp_path):
    """Item 10: a generic HC answer is Table 6's, as the search measured it."""
    lib = tmp_path / "libhcmalloc.so"
    lib.write_bytes(b"")
    f = tmp_path / "hc.env"
    emit.write_env(f, "hc", space.for_search(knobs.preset("generic")), {"verdict": "x"}, lib)
    head = f.read_text().splitlines()[0]
    assert "tuned" not in head and "generic setting (Hasan & Chang 2006, Table 6)" in head
    assert "as the search measures it (MONITOR=0, ARENAS=1)" in head
    tuned = dict(knobs.preset("generic"), QL_HIGH=40)
    emit.write_env(f, "hc", tuned, {}, lib)
    assert f.read_text().splitlines()[0].startswith("# HC, tuned by hctune")


def test_commands_are_shown_on_one_line():
    """Item 11: a multi-line program is one line in `studies` and env headers."""
    assert text.command(GAWK) == ("gawk -F, 'BEGIN { n = 0 } [+2 lines]' data.csv")
    assert text.command("lua -e 'x = 1\nprint(x)'") == "lua -e 'x = 1 [+1 lines]"
    assert len(text.command(["x" * 500])) == text.WIDTH
    from hctune.commands import studies
    import click.testing

    @click.command()
    def show():
        studies.show([{"name": "s", "objective": "mem", "created": "now", "error": None,
                       "traces": [{"id": 1, "command": "gawk 'a\nb\nc' f"}], "trials": 1,
                       "failed": 0, "feasible": 1, "best": {}, "validation": None}])
    out = click.testing.CliRunner().invoke(show).output
    assert "on trace #1 (gawk 'a [+2 lines] b c' f)" not in out
    assert "on trace #1 (gawk 'a [+2 lines])" in out and len(out.splitlines()) == 4


def _cand(label, kind="reference", setting=None):
    alloc = "hc" if kind in ("tuned", "generic") else label
    return _validate.Candidate(label, kind, alloc, setting=setting)


def _runs(numbers, rounds=6, spread=None):
    out = []
    for rnd in range(rounds):
        for label, (wall, rss) in numbers.items():
            j = (spread or {}).get(label, 0) * (1 if rnd % 2 else -1)
            out.append({"candidate": label, "round": rnd, "wall_s": wall * (1 + j),
                        "user_s": wall, "sys_s": 0.0, "peak_rss_bytes": int(rss * 2**20),
                        "problem": None})
    return out


def test_the_searched_generic_hc_is_named_apart():
    """Item 9: the validated generic HC (ARENAS=1) is not build/libhcmalloc.so (ARENAS=4)."""
    gen = space.for_search(knobs.preset("generic"))
    cands = [_cand("hc generic", "generic", gen), _cand("glibc")]
    s = _validate.summarize(cands, _runs({"hc generic": (1.0, 80), "glibc": (1.0, 100)}),
                            "mem")
    assert s["verdict"].startswith("use generic HC (as searched: MONITOR=0, ARENAS=1): ")


def test_a_busy_machine_or_wide_intervals_make_time_verdicts_unsure():
    """Item 6: the load average during the runs and the width of the time intervals."""
    cands = [_cand("jemalloc"), _cand("glibc")]
    steady = _validate.summarize(cands, _runs({"jemalloc": (0.9, 100), "glibc": (1.0, 100)}),
                                 "perf")
    steady["load"] = _validate.load_summary([0.5, 0.7, 0.6], cores=2)
    assert not steady["load"]["busy"] and _validate.load_notes(steady) == []
    steady["load"] = _validate.load_summary([5.0, 6.2, 5.5], cores=2)
    (note,) = _validate.load_notes(steady)
    assert note.startswith("time verdicts are unsure: the machine was busy during the runs "
                           "(load average 5.5, up to 6.2, on 2 cores)")
    assert note.endswith("rerun with --time-measure cpu (CPU time does not count the wait "
                         "for a core) or more --runs")
    wild = _validate.summarize(cands, _runs({"jemalloc": (0.9, 100), "glibc": (1.0, 100)},
                                            spread={"jemalloc": 0.6}), "perf")
    wild["load"] = _validate.load_summary([0.5], cores=2)
    (note,) = _validate.load_notes(wild)
    assert "the wall-time intervals are wide (vs glibc: jemalloc " in note


def test_stats_reports_progress_on_a_big_trace(tmp_path):
    """Item 12: the C tool reports what it has read; the command prints it on stderr."""
    p = tmp_path / "t.hct"
    with Writer(p, command="x") as w:
        for i in range(3000):
            w.malloc(0x1000 + 16 * i, 32)
        for i in range(3000):
            w.free(0x1000 + 16 * i)
    seen = []
    st = stats(p, progress=lambda done, total: seen.append((done, total)),
               progress_every=1000)
    assert st["events"] == 6000
    assert seen == [(k * 1000, 6000) for k in range(1, 6)]


def test_emit_so_prints_an_absolute_ld_preload(tmp_path, monkeypatch):
    """Item 12: `emit --so DIR/lib.so` printed a relative LD_PRELOAD path (the compiler is not
    what this checks: a stand-in writes the library)."""
    import click.testing
    from hctune import cli
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(emit, "compile_so",
                        lambda src, out, cc=None: (out.write_bytes(b""), ["cc"])[1])
    r = click.testing.CliRunner().invoke(cli.cli, ["--db", str(tmp_path / "r.db"), "emit",
                                                   "-o", "out/malloc.c", "--so", "out/libx.so",
                                                   "--preset", "generic"])
    assert r.exit_code == 0, r.output
    assert f"(LD_PRELOAD={tmp_path / 'out' / 'libx.so'} ./app)" in r.output, r.output


def test_best_shows_settings_whole_as_what_differs_from_generic():
    """Item 13: a tuned HC setting in the per-allocator table, at 80 columns: only what differs
    from generic, every knob of it, nothing clipped."""
    from hctune.commands import best
    gen = space.for_search(knobs.preset("generic"))
    tuned = knobs.complete(dict(gen, QL_HIGH=72, COALESCE_IN_FREE=0, TCACHE_MAX=512,
                                DECAY_MS=250, MMAP_THRESHOLD=262144, SMALL_MAX=256))
    changed = knobs.diff_from(tuned, gen)
    key = knobs.key(tuned)
    assert best.setting_text("hc", key) == ", ".join(f"{k}={v}" for k, v in changed.items())
    assert best.setting_text("hc", knobs.key(gen)) == "(generic)"
    assert best.setting_text("jemalloc", None) == "(defaults)"
    r = {"metric": "time", "trial": 5, "study": "s", "study_objective": "mem",
         "objective": "mem", "seed": None, "chosen_by": "replay", "replay_best_trial": 5,
         "changed_from_generic": changed, "allocator": "hc", "setting": tuned, "traces": [],
         "per_allocator": [{"allocator": a, "trial": n, "setting": s, "mem_ratio": 0.9,
                            "perf_ratio": 1.0, "defaults_mem_ratio": 1.0,
                            "defaults_perf_ratio": 1.0}
                           for a, n, s in (("hc", 5, key),
                                           ("jemalloc", 7, "narenas=1,dirty_decay_ms=0,"
                                                           "muzzy_decay_ms=0,tcache_max=4096"))]}
    buf = io.StringIO()
    best.show(r, Console(file=buf, width=80, force_terminal=False))
    out = buf.getvalue()
    assert "…" not in out and max(len(line) for line in out.splitlines()) <= 80
    flat = "".join(out.split())
    for k in [f"{k}={v}" for k, v in changed.items()] + ["tcache_max=4096"]:
        assert k in flat, out
    assert "MONITOR=0" not in flat.split("allocator")[-1]    # generic's own: not repeated
