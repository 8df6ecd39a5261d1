"""Validation of a speed study also runs the settings whose effect the replay cannot see (page
faults): generic HC with HUGEPAGE=1 and the other allocators' huge_pages seeds, as declared in
configs/ (`validate`), so they are judged by real runs and not reached only by the replay's
chance (issue 18, seventh pass)."""

import optuna

from hctune import allocator_knobs, knobs
from hctune.search import space
from hctune.validate.candidates import Candidate, blind_candidates


def _study(allocs):
    st = optuna.create_study(direction="minimize")
    for alloc in allocs:
        st.add_trial(optuna.trial.create_trial(
            value=1.0, user_attrs={"allocator": alloc, "setting": "", "mem": 1.0, "perf": 1.0,
                                   "constraints": [-1.0]}))
    return st


GENERIC = space.for_search(knobs.preset("generic"))


def test_a_speed_study_validates_hc_with_huge_pages_and_each_allocators_huge_pages_seed():
    notes = []
    cands = blind_candidates(_study(["hc", "glibc", "jemalloc", "mimalloc"]), "perf", GENERIC,
                             [], notes)
    got = {c.label: c for c in cands}
    assert set(got) == {"hc generic, HUGEPAGE=1", "glibc huge_pages", "jemalloc huge_pages",
                        "mimalloc huge_pages"} and notes == []
    hc = got["hc generic, HUGEPAGE=1"]
    assert hc.kind == "tuned" and hc.is_hc
    assert hc.setting == dict(GENERIC, HUGEPAGE=1)
    assert got["mimalloc huge_pages"].setting == {"large_os_pages": 1}
    assert got["mimalloc huge_pages"].env and got["glibc huge_pages"].setting == {"hugetlb": 1}
    assert all(c.kind == "tuned" for c in cands)


def test_not_for_a_memory_study_nor_an_hc_only_one_and_not_twice():
    assert blind_candidates(_study(["hc", "mimalloc"]), "mem", GENERIC, [], []) == []
    assert blind_candidates(_study(["hc"]), "perf", GENERIC, [], []) == []
    have = [Candidate("mimalloc tuned", "tuned", "mimalloc", setting={"large_os_pages": 1})]
    labels = [c.label for c in blind_candidates(_study(["hc", "mimalloc"]), "perf", GENERIC,
                                                have, [])]
    assert labels == ["hc generic, HUGEPAGE=1"]       # mimalloc's is already a candidate


def test_declared_once_in_configs():
    assert knobs.validated("perf") == [("HUGEPAGE", 1)] and knobs.validated("mem") == []
    assert knobs.knobs()["HUGEPAGE"].search == "fixed"
    assert [n for n, _ in allocator_knobs.validated_seeds("jemalloc", "pareto")] == ["huge_pages"]
