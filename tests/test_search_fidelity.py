"""Multi-fidelity trials (issue 37): sampled settings replayed on a part of the trace first, the
best third on the whole (successive halving). Against a cost model standing in for the replay
harness (test_search_study.py's way): the pruner's decisions are the same for a seed, a pruned
trial is never the best, a study with pruned trials resumes, the counts add up, and a trace too
short for a part is replayed whole with a note. tests/test_replay_bounds.py checks the
harness's part (--ops) on real traces."""

import pytest

from hctune.db import Database
from hctune.search import fidelity, study

HC = ("hc",)
OPS = 1_000_000


class Model:
    """The harness's numbers for a setting, on the whole trace or on its first `ops` ops (a
    part ranks settings nearly as the whole: its own small bias per setting)."""

    def __init__(self, ops=OPS):
        self.ops = ops
        self.calls = []

    def __call__(self, path, allocator="hc", setting=None, repeat=3, metric="time", ops=None,
                 **kw):
        self.calls.append((allocator, ops))
        part = ops is not None and ops < self.ops
        if allocator != "hc":
            return {"footprint_bytes": 1_000_000, "peak_rss_bytes": 1_000_000,
                    "time_ns_per_op": 50.0, "ops": ops or self.ops,
                    "peak_rss_sample_op": self.ops // 10}
        s = setting
        mem = 1_000_000 * (0.8 + s["QL_HIGH"] / 2000 - 0.05 * s["COALESCE"]
                           - 0.03 * s["SPLIT"] + 0.02 * (1 - s["COALESCE_QL"]))
        if part:
            mem *= 1 + 0.01 * s["COALESCE_IN_FREE"]
        return {"footprint_bytes": mem, "peak_rss_bytes": mem * 1.05,
                "time_ns_per_op": 40.0 + s["QL_HIGH"] / 100, "ops": ops or self.ops}


def make_db(tmp_path, name="h"):
    trace = tmp_path / f"{name}.trace"
    trace.write_bytes(b"stand-in")
    path = tmp_path / f"{name}.db"
    with Database(path) as d:
        d.add_trace(trace, "12" * 32, command="app", events=OPS)
    return path


def run(db, trials, model, seed=11):
    return study.run(db, (), study.Options(allocators=HC, trials=trials, seed=seed),
                     measure_fn=model)


def trials_of(db, name):
    with Database(db) as d:
        return study.load(d, name)[1].trials


def test_sampled_settings_go_whole_only_when_their_part_ranks_them_well(tmp_path):
    db, m = make_db(tmp_path), Model()
    r = run(db, 16, m)
    assert r["fidelity"]["parts"] == {"1": OPS // 10 + int(OPS * fidelity.PEAK_MARGIN)}
    ts = trials_of(db, r["study"])
    on_part = [t.number for t in ts if t.user_attrs.get(study.FIDELITY) == "part"]
    assert on_part, "successive halving pruned some settings on the part"
    acc = r["trials"]
    assert acc["pruned_on_part"] == len(on_part) == acc["pruned"]
    assert acc["trials"] == acc["seeds"] + acc["sampled"] + acc["pruned"] + acc["failed"]
    assert r["best_mem"]["trial"] not in on_part
    # every finished trial was measured whole once; the pruned ones only on their part
    wholes = sum(1 for a, ops in m.calls if a == "hc" and ops is None)
    assert wholes == r["finished"] == acc["whole"]
    # seeds always go on, and are replayed on the part too (the rung's first competitors)
    assert all(t.user_attrs.get(study.FIDELITY) == "whole" for t in ts if "seed" in t.user_attrs
               and t.state.name == "COMPLETE")


def test_the_decisions_are_the_same_for_a_seed_and_a_pruned_study_resumes(tmp_path):
    a, b = make_db(tmp_path, "a"), make_db(tmp_path, "b")
    ra, rb = run(a, 14, Model()), run(b, 14, Model())

    def decisions(db, name):
        return [(t.number, t.state.name, t.user_attrs.get(study.FIDELITY))
                for t in trials_of(db, name)]
    assert decisions(a, ra["study"]) == decisions(b, rb["study"])
    assert ra["trials"]["pruned_on_part"] > 0
    again = run(a, 18, Model())                    # resumed, its pruned trials in the storage
    # --trials counts the trials evaluated: finished, or pruned once they had lost
    assert again["evaluated"] == 18 and again["trials"]["failed"] == 0
    assert again["finished"] + again["trials"]["pruned"] == 18
    acc = again["trials"]
    assert acc["trials"] == acc["seeds"] + acc["sampled"] + acc["pruned"]
    assert acc["pruned"] >= ra["trials"]["pruned"]


@pytest.mark.parametrize("ops, objective, note", [
    (5_000, "mem", "fewer than"),
    (OPS, "pareto", "pareto"),
])
def test_whole_trace_trials_with_a_note(tmp_path, ops, objective, note):
    db, m = make_db(tmp_path), Model(ops)
    notes = []
    r = study.run(db, (), study.Options(allocators=HC, trials=6, seed=1, objective=objective),
                  measure_fn=m, notice=notes.append)
    assert r["fidelity"]["parts"] is None and note in r["fidelity"]["note"]
    assert any(note in n for n in notes)
    assert all(o is None for _, o in m.calls)         # no part was replayed
    assert r["finished"] == 6


def test_the_part_of_each_objective():
    base = {1: {"ops": 4_000_000, "peak_rss_sample_op": 1_000_000}}   # the peak at 25 %
    p = fidelity.plan("mem", "footprint_bytes", base)
    assert p.parts == {1: 1_000_000 + int(4_000_000 * fidelity.PEAK_MARGIN)}
    late = {1: {"ops": 4_000_000, "peak_rss_sample_op": 3_900_000}}
    assert fidelity.plan("mem", "peak_rss_bytes", late).parts is None
    assert "saves too little" in fidelity.plan("mem", "peak_rss_bytes", late).note
    perf = fidelity.plan("perf", "footprint_bytes", late)   # a part ranks time too loosely
    assert perf.parts is None and "rho" in perf.note
    assert fidelity.plan("mem", "mean_rss_bytes", base).parts is None
    assert fidelity.plan("mem", "footprint_bytes", base, enabled=False).note is None
