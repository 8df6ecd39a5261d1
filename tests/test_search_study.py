"""The study machinery (seeding, caching, resuming, limits, choosing) against a synthetic cost
model in place of the replay harness, so each property is checked exactly and fast. The real
harness is exercised end to end in test_search_e2e.py."""

import json

import pytest

from hctune import knobs
from hctune.db import Database
from hctune.errors import HctuneError
from hctune.search import objective, options
from hctune.search import results, seeds, study

HC = ("hc",)   # these tests measure HC's knobs with a model: HC alone, not the default


class Model:
    """A deterministic stand-in for hctune.replay.measure that counts its calls."""

    def __init__(self):
        self.calls = []

    def __call__(self, path, allocator="hc", setting=None, repeat=3, metric="time"):
        self.calls.append((allocator, knobs.key(setting) if setting else None))
        if allocator != "hc":
            return {"footprint_bytes": 1_000_000, "peak_rss_bytes": 1_000_000,
                    "time_ns_per_op": 50.0, "instructions_per_op": 200.0}
        s = setting
        mem = 1_000_000 * (0.8 + s["QL_HIGH"] / 2000 - 0.05 * s["COALESCE"] - 0.04 * s["SPLIT"]
                           + 0.02 * (1 - s["COALESCE_QL"]))
        t = 50 * (0.7 + 0.1 * s["COALESCE"] + 0.05 * s["COALESCE_QL"] - s["QL_HIGH"] / 4000)
        return {"footprint_bytes": mem, "peak_rss_bytes": mem * 1.1,
                "time_ns_per_op": t, "instructions_per_op": 4 * t}


@pytest.fixture
def db(tmp_path):
    trace = tmp_path / "app.trace"
    trace.write_bytes(b"stand-in; the model never reads it")
    path = tmp_path / "hctune.db"
    with Database(path) as d:
        d.add_trace(trace, "ab" * 32, command="app", events=1)
    return path


def trials_of(db_path, name):
    with Database(db_path) as d:
        return study.finished(study.load(d, name)[1])


def test_seeds_run_first_and_every_trial_is_stored(db):
    m = Model()
    r = study.run(db, (), study.Options(allocators=HC, objective="mem", trials=20, seed=1), measure_fn=m)
    assert r["finished"] == 20 and r["failed"] == 0
    ts = sorted(trials_of(db, r["study"]), key=lambda t: t.number)
    # the seeds first, in order, as many as leave a quarter of the trials to the sampler
    expected = [label for label, _ in seeds.seeds("mem")][:options.seed_limit(
        study.Options(allocators=HC, trials=20))]
    assert len(expected) == 15
    assert [t.user_attrs.get("seed") for t in ts] == expected + [None] * 5
    with Database(db) as d:   # nothing left waiting in a finished study
        st = study.load(d, r["study"])[1]
        assert [t.number for t in st.trials if t.state.name != "COMPLETE"] == []
    # glibc measured once; every HC setting at most once (the measurement cache)
    assert m.calls.count(("glibc", None)) == 1
    hc = [c for c in m.calls if c[0] == "hc"]
    assert len(hc) == len(set(hc))
    with Database(db) as d:
        assert d.study(r["study"])["objective"] == "mem"
        assert len(d.measurements(allocator="hc")) == len(hc)


def test_rerun_resumes_without_measuring_again(db):
    m = Model()
    opts = dict(objective="perf", metric="instructions", seed=2)
    first = study.run(db, (), study.Options(allocators=HC, trials=18, **opts), measure_fn=m)
    numbers = [t.number for t in trials_of(db, first["study"])]
    calls = len(m.calls)
    again = study.run(db, (), study.Options(allocators=HC, trials=18, **opts), measure_fn=m)
    assert again["finished"] == 18 and len(m.calls) == calls     # nothing left to do
    more = study.run(db, (), study.Options(allocators=HC, trials=22, **opts), measure_fn=m)
    assert more["finished"] == 22
    after = [t.number for t in trials_of(db, first["study"])]
    assert set(numbers) <= set(after)
    assert ("glibc", None) not in m.calls[calls:]                  # baseline reused from the DB


def test_memory_limit_makes_trials_infeasible_and_best_respects_it(db):
    m = Model()
    r = study.run(db, (), study.Options(allocators=HC, objective="perf", trials=20, seed=3,
                                        max_memory_overhead=0), measure_fn=m)
    ts = trials_of(db, r["study"])
    assert any(not study.feasible(t) for t in ts) and any(study.feasible(t) for t in ts)
    best = r["best_perf"]
    chosen = next(t for t in ts if t.number == best["trial"])
    assert study.feasible(chosen)
    assert all(t.user_attrs["perf"] >= chosen.user_attrs["perf"]
               for t in ts if study.feasible(t))
    assert r["study"].endswith("-mem0")


def test_pareto_front_is_not_dominated(db):
    r = study.run(db, (), study.Options(allocators=HC, objective="pareto", trials=24, seed=4),
                  measure_fn=Model())
    ts = trials_of(db, r["study"])
    front = [t for t in ts if t.number in r["front"]]
    assert front
    for f in front:
        a = (f.user_attrs["mem"], f.user_attrs["perf"])
        for t in ts:
            b = (t.user_attrs["mem"], t.user_attrs["perf"])
            assert not (b[0] <= a[0] and b[1] <= a[1] and b != a)


def test_best_compares_with_glibc_and_generic(db):
    m = Model()
    r = study.run(db, (), study.Options(allocators=HC, objective="mem", trials=12, seed=5), measure_fn=m)
    b = results.best(db, None, None, measure_fn=m)
    assert b["study"] == r["study"] and b["trial"] == r["best_mem"]["trial"]
    t = b["traces"][0]
    assert t["vs_glibc"]["footprint"] == pytest.approx(
        t["tuned"]["footprint_bytes"] / t["glibc"]["footprint_bytes"])
    assert t["vs_generic"]["footprint"] <= 1.0     # generic is a seed: best is at most it
    json.dumps(b)                                   # --json works


@pytest.mark.parametrize("kwargs,message", [
    (dict(objective="speed"), "unknown objective"),
    (dict(metric="cycles"), "unknown metric"),
    (dict(trials=0), "--trials"),
    (dict(max_slowdown=-5), "cannot be negative"),
    (dict(storage="redis://nowhere"), "not a database URL"),
    (dict(storage="postgresql://nobody@127.0.0.1:1/none"), "cannot use storage"),
])
def test_bad_input_is_one_clear_error(db, kwargs, message):
    with pytest.raises(HctuneError, match=message) as e:
        study.run(db, (), study.Options(allocators=HC, **kwargs), measure_fn=Model())
    assert "\n" not in str(e.value)


def test_no_trace_and_missing_study(tmp_path):
    empty = tmp_path / "empty.db"
    with pytest.raises(HctuneError, match="hctune profile"):
        study.run(empty, (), study.Options(allocators=HC), measure_fn=Model())
    with pytest.raises(HctuneError, match="no study"):
        results.best(empty, "nope")
    with pytest.raises(HctuneError, match="does not exist"):
        study.run(empty, [tmp_path / "missing.trace"], study.Options(allocators=HC), measure_fn=Model())
    (tmp_path / "zero.trace").write_bytes(b"")
    with pytest.raises(HctuneError, match="empty"):
        study.run(empty, [tmp_path / "zero.trace"], study.Options(allocators=HC), measure_fn=Model())


def test_a_broken_measurement_stops_the_search_with_its_message(db):
    def broken(path, allocator="hc", setting=None, **kw):
        if allocator == "hc":
            raise HctuneError("HC crashed on this trace")
        return Model()(path, allocator, setting)
    with pytest.raises(HctuneError, match="HC crashed"):
        study.run(db, (), study.Options(allocators=HC, trials=10), measure_fn=broken)


def test_parallel_jobs_share_the_database(db):
    m = Model()
    r = study.run(db, (), study.Options(allocators=HC, objective="perf", trials=20, jobs=2, seed=6),
                  measure_fn=m)
    assert r["finished"] >= 20 and r["failed"] == 0
    with Database(db) as d:   # every measurement stored once, from both threads
        rows = d.measurements(allocator="hc")
        assert len(rows) == len({row["setting"] for row in rows})


def test_a_subset_of_knobs_keeps_the_rest_at_their_defaults(db):
    only = ("QL_HIGH", "SPLIT")
    r = study.run(db, (), study.Options(allocators=HC, objective="mem", trials=18, seed=7, only=only),
                  measure_fn=Model())
    generic = knobs.preset("generic")
    for t in trials_of(db, r["study"]):
        s = study.trial_setting(t)
        if t.user_attrs.get("seed") is None:   # sampled, not one of the paper's seeds
            assert all(s[k] == generic[k] for k in ("COALESCE_RATIO", "HEAP_UNIT", "QL_PREALLOC"))


def test_perf_keeps_peak_rss_within_10_percent_of_glibc_by_default(db):
    """The perf default (issue 10): +10 % peak RSS over glibc unless lifted; best shows what
    the limit cost."""
    m = Model()
    r = study.run(db, (), study.Options(allocators=HC, objective="perf", trials=20, seed=8), measure_fn=m)
    assert r["study"].endswith("-mem10-gen")
    ts = trials_of(db, r["study"])
    chosen = next(t for t in ts if t.number == r["best_perf"]["trial"])
    # within +10 % of the larger of glibc's and generic HC's peak RSS
    assert max(e["rss_ratio_vs_ref"] for e in chosen.user_attrs["per_trace"]) <= 1.10
    b = results.best(db, r["study"], None, measure_fn=m)
    if any(not study.feasible(t) for t in ts):
        fastest = min(ts, key=lambda t: (t.user_attrs["perf"], t.number))
        if fastest.number != chosen.number:
            assert b["tradeoff"]["unconstrained"]["trial"] == fastest.number
    lifted = study.run(db, (), study.Options(allocators=HC, objective="perf", trials=17, seed=8,
                                             memory_limit_default=False), measure_fn=m)
    assert "-mem" not in lifted["study"]
    assert study.parse_memory_limit("none") == (None, False)
    assert study.parse_memory_limit("25") == (25.0, True)
    assert study.parse_memory_limit(None) == (None, True)
    with pytest.raises(HctuneError, match="percentage or 'none'"):
        study.parse_memory_limit("lots")


def test_objective_without_study_takes_the_latest_study_of_that_objective(db):
    m = Model()
    perf = study.run(db, (), study.Options(allocators=HC, objective="perf", trials=16, seed=9), measure_fn=m)
    mem = study.run(db, (), study.Options(allocators=HC, objective="mem", trials=16, seed=9), measure_fn=m)
    with Database(db) as d:
        assert results.chosen(d, None, "perf")[0]["name"] == perf["study"]
        assert results.chosen(d, None, "mem")[0]["name"] == mem["study"]
        assert results.chosen(d, None, None)[0]["name"] == mem["study"]   # the latest of any

class ThreadedModel(Model):
    """The same model on a trace the harness replayed on 4 threads."""

    def __call__(self, path, allocator="hc", setting=None, repeat=3, metric="time"):
        r = dict(super().__call__(path, allocator, setting, repeat, metric))
        r.update(threads=4, replay_threads=4, threads_mode="auto")
        return r


def test_thread_knobs_are_searched_only_on_multithreaded_traces(db, tmp_path):
    """knobs.toml's `threads = true` knobs join a study whose trace the harness replayed on
    threads, and only such a study."""
    m = ThreadedModel()
    r = study.run(db, (), study.Options(allocators=HC, trials=18, seed=3), measure_fn=m)
    ts = trials_of(db, r["study"])
    assert m.calls.count(("glibc", None)) == 1
    assert all("TCACHE_COUNT+1" in t.params and "TCACHE_MAX" in t.params for t in ts)
    assert len({t.params["TCACHE_COUNT+1"] for t in ts}) > 1      # sampled, not only the seeds
    assert study.trial_setting(ts[-1])["TCACHE_MAX"] == ts[-1].params["TCACHE_MAX"]
    # the same trace measured on one thread: a new study over it leaves them out
    one = tmp_path / "one.db"
    with Database(one) as d:
        d.add_trace(tmp_path / "app.trace", "cd" * 32, command="app", events=1)
    single = study.run(one, (), study.Options(allocators=HC, trials=17, seed=3), measure_fn=Model())
    for t in trials_of(one, single["study"]):
        assert not any(p.startswith("TCACHE_") for p in t.params)
    with pytest.raises(HctuneError, match="multi-threaded"):
        study.run(one, (), study.Options(allocators=HC, trials=2, study="only", only=("TCACHE_COUNT",)),
                  measure_fn=Model())


def test_a_threaded_trace_measured_on_one_thread_is_not_reused(db):
    """A multi-threaded trace's measurement from `--threads off` (or from before the threaded
    replay) is not what the search measures: measured again."""
    class OneThread(Model):
        def __call__(self, *a, **kw):
            return dict(super().__call__(*a, **kw), threads=4, replay_threads=1,
                        threads_mode="off")
    study.run(db, (), study.Options(allocators=HC, trials=1, seeds=False, study="a"), measure_fn=OneThread())
    m = ThreadedModel()
    study.run(db, (), study.Options(allocators=HC, trials=1, seeds=False, study="b"), measure_fn=m)
    assert m.calls.count(("glibc", None)) == 1


def test_a_threaded_measurement_of_an_older_harness_is_not_reused(db):
    """A threaded trace's stored measurement from before the harness read its RSS curve on the
    busiest thread (no `harness` in it, or one below objective.HARNESS) is measured again; one
    of today's harness is reused."""
    study.run(db, (), study.Options(allocators=HC, trials=1, seeds=False, study="a"),
              measure_fn=ThreadedModel())
    m = ThreadedModel()
    study.run(db, (), study.Options(allocators=HC, trials=1, seeds=False, study="b"), measure_fn=m)
    assert m.calls.count(("glibc", None)) == 0           # today's: reused
    with Database(db) as d:
        rows = d.query("SELECT id, result_json FROM hc_measurements")
        assert rows and all(json.loads(r["result_json"])["harness"] == objective.HARNESS
                            for r in rows)
        with d.transaction() as c:
            for r in rows:
                old = {k: v for k, v in json.loads(r["result_json"]).items() if k != "harness"}
                c.execute("UPDATE hc_measurements SET result_json = :j WHERE id = :id",
                          j=json.dumps(old), id=r["id"])
    m = ThreadedModel()
    study.run(db, (), study.Options(allocators=HC, trials=1, seeds=False, study="c"), measure_fn=m)
    assert m.calls.count(("glibc", None)) == 1           # an older harness's: measured again


def test_the_thread_decision_is_kept_with_the_study():
    """Decided once, when the study is new; a resumed study keeps its parameters, and a study
    made before the decision existed keeps its single-threaded ones."""
    import optuna

    s = optuna.create_study()
    assert study.study_threads(s, [{"threads": 3, "replay_threads": 3}]) is True
    assert study.study_threads(s, [{"threads": 1}]) is True
    old = optuna.create_study()
    old.enqueue_trial({"SPLIT": 1})
    assert study.study_threads(old, [{"threads": 3, "replay_threads": 3}]) is False


def test_parallel_trials_stop_at_the_count(db):
    # --jobs 2: the trial that would start while the other measures the last one is skipped
    r = study.run(db, (), study.Options(allocators=HC, objective="mem", trials=7, jobs=2, seed=3),
                  measure_fn=Model())
    with Database(db) as d:
        st = study.load(d, r["study"])[1]
    states = [t.state.name for t in st.trials]
    assert states.count("COMPLETE") == 7 and "WAITING" not in states and "RUNNING" not in states
    assert all(study.SKIPPED in t.user_attrs for t in st.trials if t.state.name == "PRUNED")


def test_options_are_said_once_and_checked():
    o = options.Options(trials=12, timeout=30.0, seed=5, validate_runs=4)
    assert options.from_json(json.dumps(options.to_json(o))) == options.Options(
        trials=12, timeout=30.0, seed=5, validate_runs=4)
    # the defaults, once; a stored study without allocators was an HC study (older versions)
    assert options.from_json("{}") == options.Options(allocators=HC)
    assert options.from_json('{"unknown": 1}') == options.Options(allocators=HC)
    assert options.stored_defaults()["allocators"] == ["hc"]
    # a new study without them searches HC and every allocator installed, as `search` does
    assert options.Options().allocators == options.DEFAULT_ALLOCATORS == ("installed",)
    assert options.from_json(options.to_json(options.Options())).allocators == ("installed",)
    # `hctune search` takes its defaults from the same model (no second literal)
    from hctune.commands import search as search_cmd
    flags = {p.name: p.default for p in search_cmd.command.params}
    assert flags["allocator_list"] == ",".join(options.DEFAULT_ALLOCATORS)
    for k in ("objective", "metric", "memory_measure", "repeat"):
        assert flags[k] == options.default(k), k
    for bad in ({"timeout": float("inf")}, {"seed": 2**32}, {"trials": 0}, {"repeat": 1.5},
                {"validate_runs": 2}, {"max_slowdown": float("nan")}, {"trials": "20"}):
        with pytest.raises(HctuneError):
            options.from_json(bad)
    with pytest.raises(HctuneError):
        options.from_json("[1")
    # a default study searches: seeds take at most three quarters of its trials
    assert options.seed_limit(options.Options()) < options.DEFAULT_TRIALS
    assert options.seed_limit(options.Options(trials=20)) == 15
    assert options.seed_limit(options.Options(trials=None, timeout=5)) is None


def test_mem_is_named_for_what_it_compares():
    """mem's ratio is HC's own footprint in an HC study (the paper's measure), the replay's
    peak RSS across allocators, or its mean or final RSS: every listing names it so."""
    named = {(a, m): options.Options(allocators=a, memory_measure=m).mem_name()
             for a in (HC, ("installed",), ("hc", "jemalloc")) for m in ("peak", "mean", "final")}
    assert named == {(HC, "peak"): "footprint", (HC, "mean"): "mean RSS",
                     (HC, "final"): "final RSS",
                     (("installed",), "peak"): "peak RSS", (("installed",), "mean"): "mean RSS",
                     (("installed",), "final"): "final RSS",
                     (("hc", "jemalloc"), "peak"): "peak RSS",
                     (("hc", "jemalloc"), "mean"): "mean RSS",
                     (("hc", "jemalloc"), "final"): "final RSS"}
    assert options.mem_name_of("{}") == "footprint"            # stored before allocators
    assert options.mem_name_of({"allocators": ["installed"]}) == "peak RSS"
    assert options.mem_name_of("[1") == "memory"                # unreadable: no claim


def test_perf_default_warns_when_generic_hc_is_far_above_glibc(db):
    """The perf default's memory limit is over the larger of glibc's and generic HC's peak RSS:
    when generic HC is well above glibc, the search says how much over glibc that allows."""
    class Fat(Model):
        def __call__(self, path, allocator="hc", setting=None, repeat=3, metric="time"):
            r = super().__call__(path, allocator, setting, repeat, metric)
            if allocator == "hc":
                r = {**r, "peak_rss_bytes": r["peak_rss_bytes"] * 1.6}
            return r
    heard = []
    study.run(db, (), study.Options(allocators=HC, objective="perf", trials=2, seed=1), measure_fn=Fat(),
              notice=heard.append)
    gen = Fat()(None, "hc", study.space.for_search(knobs.preset("generic")))["peak_rss_bytes"]
    ratio = gen / 1_000_000
    assert heard == [f"generic HC's peak RSS is {ratio:.2f}x glibc's on trace #1, so the perf "
                     f"default (+10 % over the larger of the two) allows {ratio * 1.1:.2f}x "
                     "glibc's; --max-memory-overhead 10 holds it to glibc's +10 %"]



def test_perf_default_is_quiet_when_generic_hc_is_not_above_glibc(db):
    heard = []
    study.run(db, (), study.Options(allocators=HC, objective="perf", trials=2, seed=1), measure_fn=Model(),
              notice=heard.append)
    assert heard == []


def test_search_help_states_the_limit_the_code_applies():
    """`search --help` says what apply_defaults does, from the same constant."""
    from click.testing import CliRunner
    from hctune.cli import cli
    from hctune.search import objective
    opts = study.apply_defaults(study.Options(allocators=HC, objective="perf"))
    assert opts.max_memory_overhead == objective.DEFAULT_PERF_MEMORY_OVERHEAD
    assert opts.memory_vs_generic          # over the larger of glibc's and generic HC's
    text = " ".join(CliRunner().invoke(cli, ["search", "--help"]).output.split())
    assert (f"perf without it: at most {opts.max_memory_overhead:g} % over the larger of "
            "glibc's and generic HC's") in text


def test_a_run_stops_when_asked_after_a_trial(db):
    # the worker's stop_when: a cancelled study stops after the trial it is measuring
    asked = []

    def stop():
        asked.append(1)
        return len(asked) >= 3
    r = study.run(db, (), study.Options(allocators=HC, objective="mem", trials=10, seed=1, stop_when=stop),
                  measure_fn=Model())
    assert r["finished"] == 3
