"""The search space is made from configs/knobs.toml alone, and the seeds follow the paper."""

import optuna
import pytest

from hctune import knobs
from hctune.errors import HctuneError
from hctune.search import seeds, space


@pytest.mark.parametrize("threads", [False, True])
def test_every_searchable_knob_is_one_parameter(threads):
    table = knobs.knobs()
    dists = space.distributions(threads=threads)
    searchable = [n for n, k in table.items() if k.search != "fixed" and (threads or not k.threads)]
    assert len(dists) == len(searchable)
    for name in searchable:
        assert space.param_name(table[name]) in dists
    assert set(space.fixed_values(threads=threads)) == set(table) - set(searchable)


def test_thread_knobs_are_searched_only_for_multithreaded_studies():
    """TCACHE_COUNT/TCACHE_MAX (knobs.toml `threads = true`) join the space only when a trace of
    the study is multi-threaded; the single-threaded space is the one studies had before."""
    gated = {n for n, k in knobs.knobs().items() if k.threads}
    assert {"TCACHE_COUNT", "TCACHE_MAX"} <= gated
    assert not gated & set(space.searched())
    assert gated <= set(space.searched(threads=True))
    assert space.fixed_values()["TCACHE_COUNT"] == knobs.knobs()["TCACHE_COUNT"].default
    assert space.param_name(knobs.knobs()["TCACHE_COUNT"]) == "TCACHE_COUNT+1"
    with pytest.raises(HctuneError, match="multi-threaded"):
        space.searched(["TCACHE_COUNT"])
    assert set(space.searched(["TCACHE_MAX"], threads=True)) == {"TCACHE_MAX"}
    # a stored trial's parameters say which space it came from
    g = space.for_search(knobs.preset("generic"))
    assert space.params_threaded(space.params_of(g, threads=True))
    assert not space.params_threaded(space.params_of(g))
    assert space.setting_of(space.params_of(g, threads=True), threads=True) == g


def test_thread_knobs_sample_their_ranges():
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=5))
    counts, maxes = set(), set()
    for _ in range(300):
        t = study.ask()
        s = space.suggest(t, threads=True)
        study.tell(t, 0.0)
        counts.add(s["TCACHE_COUNT"])
        maxes.add(s["TCACHE_MAX"])
    assert 0 in counts and max(counts) <= 256 and max(counts) > 64   # log_or_zero, 0 = off
    assert min(maxes) == 16 and max(maxes) > 900 and all(v % 16 == 0 for v in maxes)


@pytest.mark.parametrize("name", knobs.preset_names())
@pytest.mark.parametrize("threads", [False, True])
def test_presets_round_trip_through_parameters(name, threads):
    s = space.for_search(knobs.preset(name))
    assert space.setting_of(space.params_of(s, threads=threads), threads=threads) == s


def test_sampled_settings_are_legal_and_cover_the_ranges():
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=3))
    seen = {n: set() for n in space.searched()}
    for _ in range(300):
        t = study.ask()
        s = space.suggest(t)          # knobs.complete inside: raises on any illegal value
        study.tell(t, 0.0)
        for n in seen:
            seen[n].add(s[n])
    assert seen["SPLIT"] == {0, 1}
    assert 0 in seen["QL_PREALLOC"] and 0 in seen["IN_FREE_BLOCKS"]  # log_or_zero reaches 0
    assert all(v & (v - 1) == 0 for v in seen["HEAP_UNIT"])        # pow2
    assert min(seen["QL_HIGH"]) == 16 and max(seen["QL_HIGH"]) > 900
    assert all(1.0 <= v <= 2.0 for v in seen["COALESCE_RATIO"])


def test_seeds_start_with_generic_then_the_section_5_2_walk():
    got = seeds.seeds("mem")
    labels = [label for label, _ in got]
    assert labels[0] == "generic"
    walk = [s for label, s in got if label.startswith("§5.2")]
    first = walk[0]
    # pure segregated storage: SPLIT and every coalescing knob off, QL_HIGH high (512..1023)
    assert all(first[k] == 0 for k in seeds.GUIDELINE_ORDER)
    assert 512 <= first["QL_HIGH"] < 1024
    # then turned on one by one, in order, then QL_HIGH lowered
    for i, name in enumerate(seeds.GUIDELINE_ORDER, start=1):
        assert walk[i][name] == 1 and all(walk[i][k] == 1 for k in seeds.GUIDELINE_ORDER[:i])
    assert [s["QL_HIGH"] for s in walk[len(seeds.GUIDELINE_ORDER) + 1:]] == \
        list(seeds.GUIDELINE_QL_HIGH_LOWER)
    keys = [knobs.key(s) for _, s in got]
    assert len(keys) == len(set(keys))
    assert all(s["MONITOR"] == 0 for _, s in got)  # measured as emitted


def test_table_7_rows_for_the_objective_come_first():
    for objective in ("mem", "perf"):
        tags = [label.rsplit("-", 1)[1] for label, _ in seeds.presets(objective)]
        n = tags.count(objective)
        assert n == 7 and tags[:n] == [objective] * n


def test_single_threaded_study_holds_arenas_at_one():
    """Arenas cost a single-threaded program instructions and give it nothing: a study over
    single-threaded traces holds ARENAS at its single_thread_value, 1; a threaded one searches
    it (docs/allocator.md, "Threads and fork")."""
    assert space.fixed_values()["ARENAS"] == 1
    assert "ARENAS" not in space.searched()
    assert "ARENAS" in space.searched(threads=True)
    params = space.params_of(knobs.preset("generic"))
    assert space.setting_of(params)["ARENAS"] == 1
