"""`hctune explain` (issue 32): at the trace's peak each allocator's RSS splits into live,
internal fragmentation, free blocks kept, metadata, free pages not returned and the replay's
own memory, read from the allocator's own statistics; the parts add up to the RSS measured at
the same moment within 10 %, on glibc, HC and every other allocator installed, on a trace with
frees, one without, and a multi-threaded one."""

from __future__ import annotations

import json
import random
import subprocess
import sys

import pytest

from hctune import allocators, explain
from hctune.errors import HctuneError
from hctune.trace.writer import Writer

PEAK_MIB = 24      # live at the peak: large beside the harness's own few MiB, quick to replay


def _write(path, threads=1, frees=True, seed=1):
    """Blocks of 16 B to 24 KiB and a few of 256 KiB to 1 MiB (mapped by most allocators), about
    half freed as it goes, until PEAK_MIB are live; then (frees) everything freed."""
    rng = random.Random(seed)
    live, nxt, total = {}, 0x100000, 0
    recent = [[] for _ in range(threads)]      # each thread's blocks, newest last
    with Writer(path, command="explain test") as w:
        while total < PEAK_MIB << 20:
            th = rng.randrange(threads)
            mine = recent[th]
            if frees and mine and rng.random() < 0.4:
                p = mine.pop(rng.randrange(max(0, len(mine) - 8), len(mine)))
                total -= live.pop(p)[1]
                w.free(p, thread=th)
                continue
            size = rng.choice((16, 40, 96, 200, 700, 3000, 24000)) if rng.random() < 0.995 \
                else rng.choice((256 << 10, 1 << 20))
            nxt += size + 4096
            w.malloc(nxt, size, thread=th)
            live[nxt] = (th, size)
            mine.append(nxt)
            total += size
        if frees:
            for p, (th, _) in list(live.items()):
                w.free(p, thread=th)
    return path


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    d = tmp_path_factory.mktemp("explain")
    return {"mixed": _write(d / "mixed.hct"), "no frees": _write(d / "nofree.hct", frees=False),
            "threads": _write(d / "mt.hct", threads=4)}


def _names():
    return ["glibc", "hc"] + [n for n in ("jemalloc", "mimalloc", "tcmalloc")
                              if n in allocators.installed()]


@pytest.mark.parametrize("kind", ["mixed", "no frees", "threads"])
def test_parts_add_up_to_the_rss(traces, kind):
    r = explain.explain(traces[kind], explain.candidates(_names()))
    assert [e["allocator"] for e in r["candidates"]] == _names()
    assert PEAK_MIB << 20 <= r["peak_live"] < (PEAK_MIB + 2) << 20
    for e in r["candidates"]:
        assert set(e["parts"]) == set(explain.PARTS) and min(e["parts"].values()) >= 0, e
        assert e["parts"]["live"] == r["peak_live"] and e["failed"] == 0
        total = sum(e["parts"].values())
        assert abs(total - e["rss"]) <= explain.TOLERANCE * e["rss"], (e["label"], e["parts"],
                                                                      e["rss"])
        # each allocator was read through its own statistics, not another's
        assert e["detected"] == e["allocator"], e
        assert e["estimated"] in (None, "not_returned", "free_in_allocator")
        assert e["curve"] and e["curve"][-1]["op"] == e["ops"]
    if kind == "no frees":
        # nothing was ever freed: no free block can be kept
        for e in r["candidates"]:
            if e["allocator"] in ("glibc", "hc"):
                assert e["parts"]["free_in_allocator"] < 0.02 * e["rss"], e


def test_explain_json_and_bad_input(traces, tmp_path):
    r = subprocess.run([sys.executable, "-m", "hctune", "--db", str(tmp_path / "x.db"),
                        "explain", str(traces["mixed"]), "--allocators", "glibc,hc", "--json"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    (g, h) = out["candidates"]
    assert (g["allocator"], g["setting"]) == ("glibc", None) and h["allocator"] == "hc"
    assert h["setting"] and isinstance(g["rss"], int) and set(g["parts"]) == set(explain.PARTS)
    text = subprocess.run([sys.executable, "-m", "hctune", "--db", str(tmp_path / "x.db"),
                           "explain", str(traces["mixed"]), "--allocators", "glibc"],
                          capture_output=True, text=True, timeout=120)
    assert "parts add up to the RSS within" in text.stdout and "(RSS - other)/live" in text.stdout
    for args, msg in ((["nope.hct"], "does not exist"),
                      ([str(traces["mixed"]), "--allocators", "dlmalloc"], "--allocators")):
        r = subprocess.run([sys.executable, "-m", "hctune", "--db", str(tmp_path / "x.db"),
                            "explain", *args], capture_output=True, text=True, timeout=60)
        assert r.returncode == 2 and msg in r.stderr and "Traceback" not in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    with pytest.raises(HctuneError):
        explain.explain(tmp_path)
