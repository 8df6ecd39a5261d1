"""`--memory-measure mean|final` end to end: the replay's RSS curve (hcreplay's mean_rss_bytes),
a search that minimises it, and validation that chooses on the real runs' same figure."""

import json
import random
import sqlite3

from hctune import validate as _validate
from hctune.db import Database
from hctune.search import objective as _obj
from hctune.trace.writer import Writer
from search_support import hctune
from test_validate_rule import NOISE, ROUNDS, cand

MIB = 2**20


def _spike_then_small(path):
    """40 MiB live for a moment (64 KiB blocks, below glibc's mmap threshold, touched by the
    replay), then freed, then a long tail of small blocks: the peak is the moment, the mean
    the tail."""
    rnd = random.Random(5)
    with Writer(path, command="spike") as w:
        p = 0x10000
        big = []
        for _ in range(640):
            p += 0x10
            w.malloc(p, 65536)
            big.append(p)
        for q in big:
            w.free(q)
        live = []
        for _ in range(60000):
            p += 0x10
            w.malloc(p, rnd.choice((16, 32, 48, 64)))
            live.append(p)
            if len(live) > 200:
                w.free(live.pop(rnd.randrange(len(live))))
        for q in live:
            w.free(q)
    return path


def test_the_replay_reports_the_mean_of_its_rss_curve(tmp_path):
    from hctune import replay
    trace = _spike_then_small(tmp_path / "spike.hct")
    # glibc gives the freed 40 MiB back (its heap top is trimmed past 128 KiB free)
    r = replay.measure(trace, "glibc", repeat=1)
    assert r["rss_samples"] >= 2
    assert r["peak_rss_bytes"] >= 30 * MIB
    # the spike is a few percent of the ops: the mean sits far below the peak
    assert 0 <= r["mean_rss_bytes"] < r["peak_rss_bytes"] / 2, r


def test_a_threaded_replay_samples_its_curve_on_the_busiest_thread(tmp_path):
    """A server's main thread only starts its workers: the curve is sampled by the worker that
    does the work, so the mean is the worker's tail, not the RSS before anything ran."""
    from hctune import replay
    rnd = random.Random(6)
    with Writer(tmp_path / "server.hct", command="server") as w:
        w.malloc(0x10, 64, thread=0)
        p, big, live = 0x100000, [], []
        for _ in range(640):
            p += 0x10
            w.malloc(p, 65536, thread=1)
            big.append(p)
        for _ in range(60000):
            p += 0x10
            w.malloc(p, rnd.choice((16, 32, 48, 64)), thread=1)
            live.append(p)
            if len(live) > 200:
                w.free(live.pop(rnd.randrange(len(live))), thread=1)
        for q in big[::2]:       # half of the spike is freed late: the tail holds 20 MiB
            w.free(q, thread=1)
        for q in live + big[1::2]:
            w.free(q, thread=1)
        w.free(0x10, thread=0)
    r = replay.measure(tmp_path / "server.hct", "glibc", repeat=1)
    assert r["replay_threads"] == 2 and r["rss_samples"] >= 32, r
    # most of the worker's ops run with the 40 MiB spike resident
    assert r["mean_rss_bytes"] > r["peak_rss_bytes"] / 2, r


def test_a_search_minimises_the_mean_and_old_measurements_are_measured_again(tmp_path):
    trace = _spike_then_small(tmp_path / "spike.hct")
    db = tmp_path / "r.db"
    s = json.loads(hctune(db, "search", trace, "--allocators", "hc", "--trials", "2",
                          "--repeat", "1", "--memory-measure", "mean", "--json").stdout)
    assert s["study"].endswith("-mean") and s["finished"] == 2
    con = sqlite3.connect(db)
    rows = [json.loads(r[0]) for r in con.execute("SELECT result_json FROM hc_measurements")]
    assert rows and all(r.get("mean_rss_bytes") is not None for r in rows)
    # a measurement stored before the replay had its curve is not used for a mean study
    ev = _obj.Evaluator(db, [], mem_field="mean_rss_bytes", repeat=1)
    t = _obj.Trace(id=1, path=str(trace), sha256="x")
    for r in rows:
        r.pop("mean_rss_bytes")
    con.execute("DELETE FROM hc_measurements")
    con.commit()
    with Database(db) as d:
        d.add_measurement(1, "glibc", None, "time", 1, rows[0])
    assert ev.stored(t, "glibc", None) is None
    peak = _obj.Evaluator(db, [], repeat=1, mem_field="peak_rss_bytes")
    assert peak.stored(t, "glibc", None) is not None
    ev.close()
    peak.close()


def _runs(numbers):
    """numbers: {label: (peak MiB, mean MiB, final MiB)}; wall time alike."""
    out = []
    for rnd in range(ROUNDS):
        for label, (peak, mean, final) in numbers.items():
            f = 1 + NOISE[rnd] / 10
            out.append({"candidate": label, "round": rnd, "wall_s": 1.0, "user_s": 1.0,
                        "sys_s": 0.0, "peak_rss_bytes": int(peak * f * MIB),
                        "rss_mean_bytes": int(mean * f * MIB),
                        "rss_final_bytes": int(final * f * MIB), "rss_samples": 50,
                        "problem": None})
    return out


def test_validation_chooses_on_the_studys_memory_measure():
    """jemalloc tuned for its decay: a higher peak than glibc, but a far lower mean and end (the
    long-running service's case): peak keeps glibc, mean and final choose jemalloc tuned."""
    cands = [cand("tuned #1", "tuned"), cand("hc generic", "generic"), cand("glibc"),
             cand("jemalloc"),
             _validate.Candidate("jemalloc tuned", "tuned", "jemalloc",
                                 setting={"dirty_decay_ms": 0}, trial=7)]
    runs = _runs({"tuned #1": (101, 90, 80), "hc generic": (102, 92, 82), "glibc": (100, 90, 80),
                  "jemalloc": (110, 100, 95), "jemalloc tuned": (108, 40, 5)})
    peak = _validate.summarize(cands, runs, "mem")
    assert peak["measure"] == "peak_rss_bytes"
    assert peak["recommendation"]["candidate"] == "glibc"
    mean = _validate.summarize(cands, runs, "mem", memory_measure="mean")
    assert mean["measure"] == "rss_mean_bytes" and mean["memory_measure"] == "mean"
    assert mean["recommendation"]["candidate"] == "jemalloc tuned"
    assert mean["verdict"].startswith("use jemalloc tuned (jemalloc, trial 7): 60 % smaller on "
                                      "average than jemalloc (CI "), mean["verdict"]
    assert "56 % smaller on average than glibc" in mean["verdict"]
    row = next(e for e in mean["candidates"] if e["candidate"] == "jemalloc tuned")
    assert 0.43 < row["vs_glibc"]["rss_mean_bytes"]["ratio"] < 0.46
    final = _validate.summarize(cands, runs, "mem", memory_measure="final")
    assert final["recommendation"]["candidate"] == "jemalloc tuned"
    assert "smaller at the end than glibc" in final["verdict"]
    # the HC winner (what malloc.c carries) is chosen on the same measure
    assert mean["winner"]["allocator"] == "hc"
    # runs without a curve (too short for one sample) are not measured on it: the rule skips them
    for r in runs:
        if r["candidate"] == "jemalloc tuned":
            r["rss_mean_bytes"] = None
    again = _validate.summarize(cands, runs, "mem", memory_measure="mean")
    assert again["recommendation"]["candidate"] != "jemalloc tuned"


def test_validate_takes_the_measure_from_the_command_line(tmp_path):
    r = hctune(tmp_path / "r.db", "validate", "--memory-measure", "median", check=False)
    assert r.returncode == 2 and "Invalid value for '--memory-measure'" in r.stderr
