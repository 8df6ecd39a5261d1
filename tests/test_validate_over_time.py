"""Validation of a mem study with --max-slowdown also runs each other allocator's smallest
setting that only the replay's time limit kept out (issue 18): the replay overstates what
purging costs a real program, and the real runs judge the same limit."""

import optuna

from hctune.validate.candidates import allocator_candidates


def _study(trials):
    st = optuna.create_study(direction="minimize")
    for alloc, setting, mem, perf, cons in trials:
        st.add_trial(optuna.trial.create_trial(
            value=mem, user_attrs={"allocator": alloc, "setting": setting, "mem": mem,
                                   "perf": perf, "constraints": cons}))
    return st


# (allocator, setting, mem, perf, constraints: [time - 1.5] as search --max-slowdown 50 stores)
TRIALS = [
    ("glibc", "", 1.0, 1.0, [-0.5]),
    ("jemalloc", "", 3.0, 1.0, [-0.5]),
    ("jemalloc", "dirty_decay_ms=0", 0.10, 2.17, [0.67]),      # over the time limit only
    ("jemalloc", "narenas=1", 2.5, 1.1, [-0.4]),               # its best within the limit
    ("glibc", "trim_threshold=0", 0.04, 1.63, [0.13]),         # over; glibc's best within: none
    ("mimalloc", "", 2.6, 0.6, [-0.9]),
]


def test_settings_over_the_replays_time_limit_are_validated_too():
    notes = []
    cands = allocator_candidates(_study(TRIALS), "mem", notes, time_limited=True)
    got = {(c.label, c.allocator, tuple(sorted(c.setting.items()))) for c in cands}
    assert ("jemalloc tuned", "jemalloc", (("narenas", 1),)) in got
    assert ("jemalloc tuned, over the replay's time limit", "jemalloc",
            (("dirty_decay_ms", 0),)) in got
    assert ("glibc tuned, over the replay's time limit", "glibc",
            (("trim_threshold", 0),)) in got
    assert len(cands) == 3 and notes == []
    over = next(c for c in cands if c.label.startswith("glibc tuned, over"))
    assert over.env and over.replay == {"mem_ratio": 0.04, "perf_ratio": 1.63}


def test_without_a_time_limit_or_for_perf_nothing_over_it_is_added():
    st = _study(TRIALS)
    assert [c.label for c in allocator_candidates(st, "mem", [])] == ["jemalloc tuned"]
    assert all("over the replay" not in c.label
               for c in allocator_candidates(st, "perf", [], time_limited=True))


def test_a_setting_over_the_limit_that_is_not_smaller_is_left_out():
    trials = [t for t in TRIALS if t[0] == "jemalloc"]
    trials[1] = ("jemalloc", "dirty_decay_ms=0", 2.9, 2.17, [0.67])   # larger than narenas=1
    labels = [c.label for c in allocator_candidates(_study(trials), "mem", [],
                                                    time_limited=True)]
    assert labels == ["jemalloc tuned"]
