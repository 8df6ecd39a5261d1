"""One search across allocators (`search --allocators`), and what the user takes away from it
(`emit --env FILE`): the sourced file runs a program under that allocator with that setting,
checked through the library's own report of the options it took."""

from __future__ import annotations

import json
import random
import subprocess
from pathlib import Path

import pytest

from hctune import allocators
from hctune.errors import HctuneError
from hctune.search import study as _study
from hctune.trace.writer import Writer
from search_support import hctune

LD_SO = Path("/lib64/ld-linux-x86-64.so.2")


def _need(name):
    try:
        allocators.resolve(name)
    except HctuneError as e:
        pytest.skip(str(e))


def _sourced(env_file: Path, command: str) -> str:
    """What `command` prints in a shell that sourced `env_file` (stdout and stderr)."""
    r = subprocess.run(["sh", "-c", f'. "{env_file}" && {command}'], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout + r.stderr


def test_env_file_runs_jemalloc_with_its_setting(tmp_path):
    _need("jemalloc")
    f = tmp_path / "je.env"
    hctune(tmp_path / "r.db", "emit", "--env", f, "--allocator", "jemalloc",
           "--set", "jemalloc.dirty_decay_ms=0", "--set", "jemalloc.narenas=2")
    text = f.read_text()
    assert "MALLOC_CONF" in text and "libjemalloc2" in text and "Environment=" in text
    assert "ENV MALLOC_CONF=" in text
    # the library's own report of what it took (stats_print added to the sourced value)
    out = _sourced(f, 'MALLOC_CONF="$MALLOC_CONF,stats_print:true" /bin/true')
    assert "opt.dirty_decay_ms: 0 " in out and "opt.narenas: 2\n" in out, out[:2000]


def test_env_file_runs_mimalloc_with_its_setting(tmp_path):
    _need("mimalloc")
    f = tmp_path / "mi.env"
    hctune(tmp_path / "r.db", "emit", "--env", f, "--allocator", "mimalloc",
           "--set", "mimalloc.decommit_delay=0", "--set", "mimalloc.eager_commit=0")
    out = _sourced(f, "MIMALLOC_VERBOSE=1 /bin/true")
    assert "option 'decommit_delay': 0" in out and "option 'eager_commit': 0" in out, out


def test_env_file_sets_glibc_tunables(tmp_path):
    if not LD_SO.exists():
        pytest.skip(f"{LD_SO} is not here")
    f = tmp_path / "glibc.env"
    hctune(tmp_path / "r.db", "emit", "--env", f, "--allocator", "glibc",
           "--set", "glibc.arena_max=2", "--set", "glibc.tcache_count=0")
    assert "LD_PRELOAD" not in f.read_text().split("# The same setting")[0]
    out = _sourced(f, f"{LD_SO} --list-tunables")
    assert "glibc.malloc.arena_max: 0x2 " in out and "glibc.malloc.tcache_count: 0x0 " in out


def test_env_file_runs_tcmalloc(tmp_path):
    _need("tcmalloc")
    f = tmp_path / "tc.env"
    hctune(tmp_path / "r.db", "emit", "--env", f, "--allocator", "tcmalloc",
           "--set", "tcmalloc.aggressive_decommit=1")
    # gperftools prints no options; its stats show it is the allocator, the variable is set
    out = _sourced(f, 'MALLOCSTATS=1 /bin/true; echo "decommit=$TCMALLOC_AGGRESSIVE_DECOMMIT"')
    assert "MALLOC:" in out and "decommit=1" in out, out


def test_env_file_for_hc_preloads_the_library_written_beside_it(tmp_path):
    f = tmp_path / "out" / "hc.env"
    f.parent.mkdir()
    hctune(tmp_path / "r.db", "emit", "--env", f, "--preset", "generic")
    so = f.parent / "libhcmalloc.so"
    assert so.exists() and (f.parent / "malloc.c").exists()
    stats = tmp_path / "stats.txt"
    _sourced(f, f'HCMALLOC_STATS="{stats}" /bin/true')
    assert "footprint" in stats.read_text()


@pytest.mark.parametrize("args, message", [
    (["--allocator", "jemalloc", "--set", "jemalloc.narenas=x"], "is not an integer"),
    (["--allocator", "jemalloc", "--set", "jemalloc.narena=1"], "unknown jemalloc knob"),
    (["--allocator", "nope"], "--allocator: use hc or"),
])
def test_emit_env_bad_input_is_one_line(tmp_path, args, message):
    r = hctune(tmp_path / "r.db", "emit", "--env", tmp_path / "x.env", *args, check=False)
    assert r.returncode == 2 and message in r.stderr and r.stderr.strip().count("\n") == 0


def test_an_allocator_not_installed_is_left_out_with_one_line(monkeypatch):
    monkeypatch.setattr(allocators, "_LIB_DIRS", ())
    monkeypatch.setattr(allocators, "_ldconfig", lambda: {})
    lines = []
    assert _study.check_allocators(["hc", "glibc", "tcmalloc"], lines.append) == ("hc", "glibc")
    assert len(lines) == 1 and "install the Debian package libtcmalloc-minimal4" in lines[0]
    with pytest.raises(HctuneError, match="no declared knobs"):
        _study.check_allocators(["hc", "kingsley"])


def _small_trace(path):
    rnd = random.Random(3)
    with Writer(path, command="small") as w:
        live, p = [], 0x1000
        for _ in range(3000):
            p += 0x10
            w.malloc(p, rnd.choice((24, 48, 200, 3000, 70000)))
            live.append(p)
            if rnd.random() < 0.4:
                w.free(live.pop(rnd.randrange(len(live))))
        for q in live:
            w.free(q)
    return path


def test_search_across_allocators_then_emit(tmp_path):
    _need("jemalloc")
    db = tmp_path / "r.db"
    trace = _small_trace(tmp_path / "small.hct")
    r = hctune(db, "search", trace, "--allocators", "glibc,jemalloc", "--trials", "6",
               "--repeat", "1", "--seed", "1", "--json")
    s = json.loads(r.stdout)
    # --trials counts evaluated trials: finished, or pruned once they had lost to the best
    assert s["finished"] + s["trials"]["pruned"] == 6 and s["study"].endswith("-x-glibc+jemalloc")
    table = {row["allocator"]: row for row in s["per_allocator"]}
    assert set(table) == {"glibc", "jemalloc"}
    # the seeds: each allocator with its library defaults; glibc's is glibc itself
    assert table["glibc"]["defaults_mem_ratio"] == 1.0
    assert table["jemalloc"]["defaults_mem_ratio"] is not None
    best = s["best_mem"]
    assert best["mem_ratio"] == min(row["mem_ratio"] for row in table.values())
    # the same command resumes: no new trials
    again = json.loads(hctune(db, "search", trace, "--allocators", "glibc,jemalloc",
                              "--trials", "6", "--repeat", "1", "--json").stdout)
    assert again["finished"] == s["finished"] and again["trials"]["trials"] == 6
    b = json.loads(hctune(db, "best", "--json").stdout)
    assert {r["allocator"] for r in b["per_allocator"]} == {"glibc", "jemalloc"}
    assert b["allocator"] == best["allocator"]
    f = tmp_path / "best.env"
    hctune(db, "emit", "--env", f)
    assert f"trial {best['trial']}" in f.read_text()
    if best["allocator"] != "hc":
        r = hctune(db, "emit", "-o", tmp_path / "malloc.c", check=False)
        assert r.returncode == 2 and "emit --env FILE" in r.stderr


def test_the_default_searches_hc_and_every_allocator_installed(tmp_path):
    db = tmp_path / "r.db"
    trace = _small_trace(tmp_path / "small.hct")
    s = json.loads(hctune(db, "search", trace, "--trials", "3", "--repeat", "1", "--seed", "1",
                          "--json").stdout)
    installed = _study.default_allocators()
    assert installed[:2] == ("hc", "glibc")
    assert s["study"].endswith("-x-" + "+".join(installed))
    # the seeds come as each allocator as it comes first: HC's generic, then glibc, ...
    table = {row["allocator"]: row for row in s["per_allocator"]}
    assert set(table) == set(installed[:3]), table
    assert table["glibc"]["defaults_mem_ratio"] == 1.0
    # `--allocators hc` is the HC-only study of before
    h = json.loads(hctune(db, "search", trace, "--trials", "1", "--repeat", "1",
                          "--allocators", "hc", "--json").stdout)
    assert "-x-" not in h["study"] and not h.get("per_allocator")


def test_search_bad_allocator_list(tmp_path):
    trace = _small_trace(tmp_path / "small.hct")
    r = hctune(tmp_path / "r.db", "search", trace, "--allocators", "hc,nope", "--trials", "1",
               check=False)
    assert r.returncode == 2 and "'nope' has no declared knobs" in r.stderr
    r = hctune(tmp_path / "r.db", "search", trace, "--memory-measure", "median", "--trials", "1",
               check=False)
    assert r.returncode == 2 and "Invalid value for '--memory-measure'" in r.stderr


def test_validation_runs_each_allocators_best_with_its_environment(c_program, tmp_path):
    _need("jemalloc")
    app = c_program("validate_app")
    db = tmp_path / "r.db"
    hctune(db, "profile", "-o", tmp_path / "app.hct", app, "60000", cwd=tmp_path)
    hctune(db, "search", "--allocators", "glibc,jemalloc", "--trials", "8", "--repeat", "1",
           "--seed", "4", cwd=tmp_path)
    r = hctune(db, "validate", "--runs", "3", "--json", cwd=tmp_path)
    s = json.loads(r.stdout)
    rows = {c["candidate"]: c for c in s["candidates"]}
    tuned = [c for c in rows.values() if c["kind"] == "tuned"]
    assert tuned, rows.keys()
    for c in tuned:
        # another allocator's best runs as that allocator, with its own knobs' setting
        assert c["allocator"] in ("glibc", "jemalloc") and c["setting"], c
        assert c["candidate"] == f"{c['allocator']} tuned" and c["runs"] == 3
        assert not c["disqualified"], c
    # the RSS curve of the real runs (hcrun's samples), where the program ran long enough
    glibc = rows["glibc"]
    if "rss_mean_bytes" in glibc["median"]:
        assert 0 < glibc["median"]["rss_mean_bytes"] <= glibc["median"]["peak_rss_bytes"]
    assert s["winner"]["allocator"] == "hc"     # the HC winner: what malloc.c would carry
    rec = s["recommendation"]                  # over every candidate: can be jemalloc, glibc
    f = tmp_path / "winner.env"
    hctune(db, "emit", "--env", f)
    text = f.read_text()
    assert f"{rec['candidate']} is the recommendation of validation" in text
    if rec["kind"] == "reference":       # an allocator as it comes: its own evidence, no Table 6
        assert f"source: {rec['allocator']}'s library defaults" in text
        assert f"{rec['allocator']} as it comes" in text and "Table 6" not in text
    if rec["allocator"] == "jemalloc":
        assert "libjemalloc" in text.split("# The same setting")[0]
    if rec["allocator"] == "glibc" and not rec["setting"]:
        assert "Nothing to set" in text


def test_report_of_a_search_across_allocators(tmp_path):
    _need("jemalloc")
    db = tmp_path / "r.db"
    trace = _small_trace(tmp_path / "small.hct")
    hctune(db, "search", trace, "--allocators", "hc,jemalloc", "--trials", "4", "--repeat", "1",
           "--seed", "1")
    from hctune import report
    data = report.collect(db)
    assert {t["allocator"] for t in data["trials"]} <= {"hc", "jemalloc"}
    assert "jemalloc" in {t["allocator"] for t in data["trials"]}
    labels = [r["allocator"] for r in data["traces"][0]["allocators"]]
    assert "glibc" in labels and "jemalloc" in labels
    hctune(db, "report", "-o", tmp_path / "r.html")
    html = (tmp_path / "r.html").read_text()
    assert "jemalloc: trials and front" in html and "hc: trials and front" in html


def test_hc_alone_is_the_search_of_before():
    traces = [type("T", (), {"sha256": "ab" * 32})()]
    hc = _study.Options(objective="mem", allocators=("hc",))
    assert not hc.cross and hc.mem_field() == "footprint_bytes"
    name = _study.default_name(traces, hc)
    assert name.startswith("mem-time-") and name.count("-") == 2   # as before: no suffix
    x = _study.Options(objective="mem", allocators=("hc", "jemalloc"))
    assert x.cross and x.mem_field() == "peak_rss_bytes"
    assert _study.default_name(traces, x).endswith("-x-hc+jemalloc")
    f = _study.Options(objective="mem", memory_measure="final")
    assert f.mem_field() == "final_rss_bytes" and _study.default_name(traces, f).endswith("-final")


def test_compare_with_another_allocators_knobs(tmp_path):
    _need("jemalloc")
    trace = _small_trace(tmp_path / "small.hct")
    r = hctune(tmp_path / "r.db", "compare", trace, "-n", "1", "--inner", "1", "--presets", "",
               "--allocators", "glibc,jemalloc", "--set", "jemalloc.dirty_decay_ms=0", "--json")
    rows = {row["label"]: row for row in json.loads(r.stdout)["rows"]}
    assert rows["jemalloc dirty_decay_ms=0"]["setting"] == "dirty_decay_ms=0"
    assert rows["jemalloc"]["setting"] is None
    r = hctune(tmp_path / "r.db", "compare", trace, "--set", "narenas=1", check=False)
    assert r.returncode == 2 and "before the dot" in r.stderr
