"""`hctune replay` and `hctune compare`: results stored in the database, the latest trace used
when none is named, bad input answered with one line and exit 2."""

from __future__ import annotations

import json
import shutil

import pytest

from hctune import cli, replay
from hctune.db import Database
from hctune.trace import register


def run(capsys, *args):
    rc = cli.main(list(args))
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture
def trace(replay_traces):  # noqa: F811
    return replay_traces.get("gawk") or next(iter(replay_traces.values()))


def test_replay_json_and_stored(capsys, tmp_path, trace):
    db = tmp_path / "h.db"
    rc, out, err = run(capsys, "--db", str(db), "replay", str(trace), "-a", "hc", "--preset",
                       "gawk-perf", "--set", "QL_HIGH=128", "--repeat", "3", "--json")
    assert rc == 0, err
    r = json.loads(out)
    assert r["allocator"] == "hc" and r["setting"]["QL_HIGH"] == 128
    assert r["setting"]["COALESCE_QL"] == 0 and len(r["times_ns"]) == 3
    with Database(db) as d:
        (row,) = d.measurements()
        assert row["allocator"] == "hc" and "QL_HIGH=128" in row["setting"]
        assert json.loads(row["result_json"])["ops"] == r["ops"]
        t = d.trace(row["trace_id"])
        assert t["path"] == str(trace.resolve()) and t["events"] == r["events"]


def test_replay_latest_trace_from_db(capsys, tmp_path, trace):
    db = tmp_path / "h.db"
    with Database(db) as d:
        register.named(d, trace)
    rc, out, err = run(capsys, "--db", str(db), "replay", "-a", "glibc")
    assert rc == 0, err
    assert str(trace) in out and "ns/op" in out and "peak RSS" in out


def test_replay_without_any_trace(capsys, tmp_path):
    rc, out, err = run(capsys, "--db", str(tmp_path / "h.db"), "replay")
    assert rc == 2 and "no trace given" in err and "Traceback" not in err


@pytest.mark.parametrize("args, message", [
    (["-a", "nosuch"], "unknown allocator 'nosuch'"),
    (["-a", "/no/such/lib.so"], "does not exist"),
    (["--set", "QL_HIGH=5"], "QL_HIGH=5 is outside its range"),
    (["--set", "NOPE=1"], "unknown knob 'NOPE'"),
    (["--preset", "nope"], "unknown preset 'nope'"),
    (["-a", "glibc", "--preset", "generic"], "apply to the hc allocator"),
    (["--repeat", "0"], "0 is not in the range"),
])
def test_replay_bad_input(capsys, tmp_path, trace, args, message):
    rc, out, err = run(capsys, "--db", str(tmp_path / "h.db"), "replay", str(trace), *args)
    assert rc == 2 and message in err and "Traceback" not in err
    assert len([ln for ln in err.splitlines() if ln.strip()]) <= 3  # Click's usage lines at most


def test_corrupt_and_missing_traces(capsys, tmp_path, trace):
    data = trace.read_bytes()
    cases = {
        "garbage.hct": b"not a trace at all, just text\n" * 10,
        "truncated.hct": data[: len(data) // 2],
        "empty.hct": b"",
        "flipped.hct": data[:200] + bytes(b ^ 0x5A for b in data[200:400]) + data[400:],
    }
    for name, content in cases.items():
        (tmp_path / name).write_bytes(content)
        rc, out, err = run(capsys, "--db", str(tmp_path / "h.db"), "replay", str(tmp_path / name),
                           "-a", "glibc")
        assert rc == 2, (name, out, err)
        assert err.startswith("hctune: error: ") and len(err.strip().splitlines()) == 1, err
    rc, out, err = run(capsys, "replay", str(tmp_path / "missing.hct"))
    assert rc == 2 and "does not exist" in err
    rc, out, err = run(capsys, "replay", str(tmp_path))
    assert rc == 2


def test_instructions_metric_cli(capsys, tmp_path, trace):
    if not shutil.which("valgrind"):
        pytest.skip("valgrind not installed (.ci/run installs it)")
    rc, out, err = run(capsys, "--db", str(tmp_path / "h.db"), "replay", str(trace), "-a",
                       "kingsley", "--metric", "instructions", "--repeat", "1")
    assert rc == 0, err
    assert "instructions" in out and "per op (callgrind)" in out


def test_compare_tables_8_and_9(capsys, tmp_path, trace):
    db = tmp_path / "h.db"
    rc, out, err = run(capsys, "--db", str(db), "compare", str(trace), "--allocators",
                       "glibc,kingsley,jemalloc", "--presets", "generic,gawk-perf",
                       "--repeat", "2", "--inner", "2", "--json")
    assert rc == 0, err
    r = json.loads(out)
    labels = [row["label"] for row in r["rows"]]
    assert labels == ["glibc", "kingsley", "jemalloc", "hc:generic", "hc:gawk-perf"]
    rows = {row["label"]: row for row in r["rows"]}
    assert r["baseline"] == "glibc" and rows["glibc"]["time_norm"] == 1.0
    assert rows["glibc"]["memory_norm"] == 1.0
    for row in r["rows"]:
        assert len(row["times_ns_per_op"]) == 2 and row["time_ns_per_op"] > 0
        assert row["time_norm"] == pytest.approx(row["time_ns_per_op"] /
                                                 rows["glibc"]["time_ns_per_op"])
    assert rows["hc:generic"]["hc_footprint_bytes"] > r["max_live_bytes"]
    assert rows["kingsley"]["hc_footprint_bytes"] is None
    with Database(db) as d:
        assert len(d.measurements()) == 2 * 5  # every single run is kept
    # the table form
    rc, out, err = run(capsys, "--db", str(db), "compare", str(trace), "--allocators", "glibc",
                       "--presets", "generic", "--repeat", "1", "--inner", "1")
    assert rc == 0 and "hc:generic" in out and "×glibc" in out


def test_compare_bad_input(capsys, tmp_path, trace):
    rc, out, err = run(capsys, "--db", str(tmp_path / "h.db"), "compare", str(trace),
                       "--allocators", "glibc,bogus")
    assert rc == 2 and "unknown allocator 'bogus'" in err
    rc, out, err = run(capsys, "--db", str(tmp_path / "h.db"), "compare", str(trace),
                       "--allocators", "", "--presets", "")
    assert rc == 2 and "nothing to compare" in err
