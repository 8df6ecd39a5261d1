"""What a search says it searched (issue 37, 'Honest accounting'; issue 32 item 7): the counts
of seeds, sampled, pruned and failed trials add up; a search of only seeds says so in its
summary, in `hctune studies` and in `best`'s verdict; --timeout's deadline, on an injected
clock, starts no trial after it and asks the running ones to stop. A cost model stands in for
the replay harness (as in test_search_study.py): exact and fast."""

import json

import pytest

from conftest import hctune
from hctune import knobs, replay
from hctune.db import Database
from hctune.errors import HctuneError
from hctune.search import options, results, study

HC = ("hc",)


def model(path, allocator="hc", setting=None, repeat=3, metric="time"):
    if allocator != "hc":
        return {"footprint_bytes": 1_000_000, "peak_rss_bytes": 1_000_000,
                "time_ns_per_op": 50.0, "instructions_per_op": 200.0}
    mem = 1_000_000 * (0.8 + setting["QL_HIGH"] / 2000 - 0.05 * setting["COALESCE"])
    return {"footprint_bytes": mem, "peak_rss_bytes": mem * 1.1,
            "time_ns_per_op": 40.0 + setting["SPLIT"], "instructions_per_op": 160.0}


@pytest.fixture
def db(tmp_path):
    trace = tmp_path / "app.trace"
    trace.write_bytes(b"stand-in; the model never reads it")
    path = tmp_path / "hctune.db"
    with Database(path) as d:
        d.add_trace(trace, "cd" * 32, command="app", events=1)
    return path


def test_the_counts_add_up_and_name_the_sampled_trials(db):
    calls = {"n": 0}

    def flaky(path, allocator="hc", setting=None, **kw):
        if allocator == "hc":
            calls["n"] += 1
            if calls["n"] == 3:    # one failure (not three in a row: the search goes on)
                raise HctuneError("a crash of this one setting")
        return model(path, allocator, setting)
    r = study.run(db, (), study.Options(allocators=HC, trials=12, seed=3), measure_fn=flaky)
    acc = r["trials"]
    assert acc["trials"] == acc["seeds"] + acc["sampled"] + acc["pruned"] + acc["failed"]
    assert acc["failed"] == 1 and acc["seeds"] + acc["sampled"] == r["finished"] >= 11
    # the failure was the third seed
    assert acc["seeds"] + 1 == options.seed_limit(study.Options(trials=12))
    assert acc["sampled"] >= 3
    assert acc["sampler_ran"] and r["note"] is None
    with Database(db) as d:
        st = study.load(d, r["study"])[1]
        sampled = [t for t in study.finished(st) if "seed" not in t.user_attrs]
        assert len(sampled) == acc["sampled"]


def test_a_search_of_only_seeds_says_so_everywhere(db):
    r = study.run(db, (), study.Options(allocators=HC, trials=3, seed=1), measure_fn=model)
    acc = r["trials"]
    assert (acc["seeds"], acc["sampled"], acc["sampler_ran"]) == (3, 0, False)
    assert "sampler never proposed" in r["note"] and "--trials or --timeout" in r["note"]
    # the verdict of `best`
    assert "sampler never proposed" in results.best(db, r["study"], measure_fn=model)["note"]
    # `hctune studies`, as text and JSON
    out = hctune(db, "studies").stdout
    assert "only seeds were measured" in out
    listed = json.loads(hctune(db, "studies", "--json").stdout)
    assert listed[0]["searched"]["seeds"] == 3 and listed[0]["note"]
    # once the sampler has run, the note goes
    r = study.run(db, (), study.Options(allocators=HC, trials=8, seed=1), measure_fn=model)
    assert r["trials"]["sampled"] >= 1 and r["note"] is None


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def test_the_deadline_starts_nothing_after_it_and_stops_running_replays(db):
    clock = Clock()
    starts, asked = [], []

    def slow(path, allocator="hc", setting=None, repeat=3, metric="time", should_stop=None):
        if allocator != "hc":
            return model(path, allocator, setting)
        starts.append(clock.now)
        clock.now += 10.0             # each replay takes 10 s of the injected clock
        if should_stop is not None and should_stop():
            asked.append(clock.now)
            raise replay.ReplayStopped("stopped")
        return model(path, allocator, setting)
    opts = study.Options(allocators=HC, trials=None, timeout=35.0, seed=2, clock=clock)
    r = study.run(db, (), opts, measure_fn=slow)
    deadline = 1000.0 + 35.0
    assert starts and all(s < deadline for s in starts)       # none started after it
    assert len(asked) == 1                                   # the one running was asked to stop
    acc = r["trials"]
    assert acc["stopped"] == 1 and acc["pruned"] == 1 and r["finished"] == 3
    assert acc["trials"] == acc["seeds"] + acc["sampled"] + acc["pruned"] + acc["failed"] == 4
    # the seed cut off at the deadline is queued again, for the run that resumes the study
    with Database(db) as d:
        st = study.load(d, r["study"])[1]
        cut = [t for t in st.trials if study.STOPPED in t.user_attrs]
        waiting = [t.user_attrs.get("seed") for t in st.trials if t.state.name == "WAITING"]
    assert len(cut) == 1 and cut[0].user_attrs.get("seed") in waiting


def test_a_pruned_trial_is_never_the_best(db):
    def pruning(path, allocator="hc", setting=None, **kw):
        if allocator == "hc" and setting["QL_HIGH"] == 64:      # would be the smallest
            raise replay.ReplayPruned("over the bound", {"peak_rss_bytes": 1})
        return model(path, allocator, setting)
    r = study.run(db, (), study.Options(allocators=HC, trials=16, seed=4), measure_fn=pruning)
    with Database(db) as d:
        st = study.load(d, r["study"])[1]
        pruned = [t.number for t in st.trials if study.PRUNED_BY in t.user_attrs]
    assert pruned and r["trials"]["pruned"] == len(pruned)
    assert r["best_mem"]["trial"] not in pruned


def test_jobs_and_timeouts_are_checked():
    assert options.parse_jobs("auto") >= 1 and options.parse_jobs("3") == 3
    for bad in ("0", "-1", "x", 0):
        with pytest.raises(HctuneError, match="--jobs"):
            options.parse_jobs(bad)


@pytest.mark.parametrize("args, message", [
    (("--jobs", "0"), "--jobs must be at least 1"),
    (("--jobs", "many"), "--jobs takes a whole number"),
    (("--timeout", "-5"), "timeout"),
])
def test_bad_search_options_are_one_line_and_exit_2(tmp_path, args, message):
    r = hctune(tmp_path / "h.db", "search", *args, check=False)
    assert r.returncode == 2 and message in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


def bounded(path, allocator="hc", setting=None, repeat=3, metric="time", max_rss_bytes=None,
            **kw):
    """The model, ending early as the harness does when its peak RSS passes the bound."""
    r = model(path, allocator, setting)
    if max_rss_bytes is not None and r["peak_rss_bytes"] > max_rss_bytes:
        raise replay.ReplayPruned("RSS passed the bound", {"pruned": "rss"})
    return r


def pruned_trials(tmp_path, name):
    trace = tmp_path / f"{name}.trace"
    trace.write_bytes(b"stand-in")
    path = tmp_path / f"{name}.db"
    with Database(path) as d:
        d.add_trace(trace, "ef" * 32, command="app", events=1)
    # random sampling, no seeds (seeds are never cut short): settings far from the best
    r = study.run(path, (), study.Options(allocators=HC, trials=12, seed=5, sampler="random"),
                  measure_fn=bounded)
    with Database(path) as d:
        st = study.load(d, r["study"])[1]
        return r, st, [t.number for t in st.trials if study.PRUNED_BY in t.user_attrs]


def test_replays_that_have_lost_are_pruned_deterministically(tmp_path):
    r, st, pruned = pruned_trials(tmp_path, "a")
    assert pruned, "the model's large settings pass 1.1x the best's peak RSS"
    best = r["best_mem"]
    assert best["trial"] not in pruned
    # every pruned trial really was past the bound of the best before it
    for n in pruned:
        t = st.trials[n]
        rss = bounded("", "hc", knobs.complete(space_setting(t)))["peak_rss_bytes"]
        assert rss > best["mem_ratio"] * 1_000_000 * 1.1 * (1 + study.PRUNE_MEM_TOLERANCE)
    assert r["trials"]["pruned"] == len(pruned)
    _, _, again = pruned_trials(tmp_path, "b")
    assert again == pruned                      # the same decisions for the same seed


def space_setting(frozen):
    from hctune.search import space
    return space.setting_of(frozen.params)
