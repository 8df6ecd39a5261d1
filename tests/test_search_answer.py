"""One answer per study (hctune.search.answer.decide): `best`, `emit`, `report` and the
service name the same one, and a validated winner that came from another study is that study's
trial (issue 32, items 2 and 8). Studies measured by a cost model (test_search_study's), the
validation summarized from made-up real runs: no replay, no program run."""

import io
import json
import sys

import pytest
from rich.console import Console

from hctune import emit, knobs, report
from hctune import validate as _validate
from hctune.commands import best as best_cmd
from hctune.db import Database
from hctune.search import answer, results, study

_candidates = sys.modules["hctune.validate.candidates"]   # (the package's `candidates` is the function)

from test_search_study import Model, db  # noqa: F401 (the fixture)


def _numbers(rss: dict) -> list[dict]:
    runs = []
    for rnd in range(6):
        for label, mib in rss.items():
            runs.append({"candidate": label, "round": rnd, "wall_s": 1.0 + rnd * 0.001,
                         "user_s": 1.0, "sys_s": 0.0, "peak_rss_bytes": (mib << 20) + rnd,
                         "problem": None})
    return runs


@pytest.fixture
def validated(db):  # noqa: F811 (the fixture above)
    """A mem study across HC and glibc validated with the perf study's best HC setting (a
    trial of the other study, whose number the mem study also has) as the HC winner and glibc
    tuned as the recommendation."""
    m = Model()
    mem = study.run(db, (), study.Options(allocators=("hc", "glibc"), objective="mem",
                                          trials=8, seed=5), measure_fn=m)
    perf = study.run(db, (), study.Options(allocators=("hc",), objective="perf", trials=6,
                                           seed=6), measure_fn=m)
    with Database(db) as d:
        _, pst = study.load(d, perf["study"])
        _, mst = study.load(d, mem["study"])
        row = d.study(mem["study"])
    # a perf trial whose number the mem study also has, with another setting there
    mine = {t.number: t.user_attrs.get("setting") for t in study.finished(mst)}
    pt = next(t for t in sorted(study.finished(pst), key=lambda t: -t.number)
              if t.number in mine and mine[t.number] != t.user_attrs.get("setting"))
    gt = next(t for t in study.finished(mst) if study.trial_allocator(t) == "glibc")
    C = _validate.Candidate
    cands = [C("perf best", "tuned", "hc", setting=study.trial_setting(pt),
               origin={"study": perf["study"], "objective": "perf", "trial": pt.number}),
             C("hc generic", "generic", "hc", setting=knobs.complete({})),
             C("glibc", "reference", "glibc"),
             C("glibc tuned", "tuned", "glibc", setting=study.trial_setting(gt),
               trial=gt.number)]
    s = _validate.summarize(cands, _numbers({"perf best": 90, "hc generic": 100, "glibc": 100,
                                             "glibc tuned": 60}), "mem")
    assert s["winner"]["candidate"] == "perf best"
    assert s["recommendation"]["candidate"] == "glibc tuned"
    with Database(db) as d:
        vid = d.add_validation(row["name"], "mem", ["app"], "/", None, 6)
        s.update(validation_id=vid, study=row["name"], runs=6, date="2026-12-06",
                 program={"argv": ["app"], "cwd": "/", "stdin": None},
                 output_check="stdout sha256 and exit status against glibc's")
        d.finish_validation(vid, "done", s)
    return db, mem["study"], perf["study"], pt.number, gt.number, m


def test_best_emit_and_report_name_the_same_answer(validated):
    db, mem, perf, pn, gn, m = validated
    with Database(db) as d:
        a = answer.decide(d, mem)
    assert a.answer.allocator == "glibc" and a.answer.number == gn
    assert a.winner.origin["study"] == perf and a.winner.number == pn
    b = results.best(db, mem, measure_fn=m)
    # issue 32, item 2: best's first line names the verdict's answer, HC's best under it
    out = io.StringIO()
    best_cmd.show(b, Console(file=out, width=200))
    first, second = out.getvalue().splitlines()[:2]
    assert f"answer for mem: glibc tuned (trial {gn})" in first
    assert "HC's best" in second and f"{perf}'s trial {pn}" in second
    # the winner is the perf study's trial, not the mem study's trial of the same number
    assert b["trial"] == pn and b["trial_study"] == perf
    with Database(db) as d:
        pt = next(t for t in study.finished(study.load(d, perf)[1]) if t.number == pn)
    assert b["setting"] == study.trial_setting(pt)
    assert b["seed"] == pt.user_attrs.get("seed")
    # emit --env: the same answer; emit -o: the same HC winner, labelled with its own study
    alloc, _, prov = emit.choose(db, mem, None, None, (), any_allocator=True)
    assert alloc == "glibc" and "glibc tuned is the recommendation" in prov["chosen by"]
    assert b["answer"]["label"] in first
    alloc, setting, prov = emit.choose(db, mem, None, None, ())
    assert alloc == "hc" and setting == b["setting"]
    assert f"study {perf}'s trial {pn}" in prov["objective"]
    # the report: the same answer and the same HC setting measured
    data = report.collect(db, mem, measure_references=False)
    assert data["answer"] == a.answer.label() == b["answer"]["label"]
    assert data["summary"]["use"] == "use glibc tuned"


def test_an_unvalidated_study_answers_its_replay_best(db):  # noqa: F811 (the fixture above)
    m = Model()
    r = study.run(db, (), study.Options(allocators=("hc", "glibc"), objective="mem", trials=10,
                                        seed=7), measure_fn=m)
    with Database(db) as d:
        a = answer.decide(d, r["study"])
    assert a.answer is a.winner and a.chosen_by == "replay"
    assert a.winner.number == r["best_mem"]["trial"]
    b = results.best(db, r["study"], measure_fn=m)
    assert b["answer"]["trial"] == b["trial"] == r["best_mem"]["trial"]
    data = report.collect(db, r["study"], measure_references=False)
    assert data["answer"] == a.answer.label()
    json.dumps(b)


def test_the_generic_note_names_hc_in_a_study_across_allocators(db, monkeypatch):  # noqa: F811
    """Issue 32, item 8: "the study's best is the generic setting" is not said of a study
    whose best is another allocator; HC's best is named as HC's."""
    class HcWorse(Model):      # every HC setting 10x glibc's footprint: over the limit
        def __call__(self, path, allocator="hc", setting=None, repeat=3, metric="time"):
            r = super().__call__(path, allocator, setting, repeat, metric)
            return {k: v * 10 for k, v in r.items()} if allocator == "hc" else r
    r = study.run(db, (), study.Options(allocators=("hc", "glibc"), objective="mem", trials=8,
                                        seed=8, max_memory_overhead=0), measure_fn=HcWorse())
    # the libraries are not what this test is about: no build
    monkeypatch.setattr(_candidates.allocators, "resolve",
                        lambda name, setting=None, db=None: type("A", (), {
                            "library": None, "variables": {}})())
    with Database(db) as d:
        row, st = study.load(d, r["study"])
        assert study.trial_allocator(study.choose(st, "mem")) == "glibc"
        out, notes = _candidates.candidates(d, row, st, references=False)
    assert not [c for c in out if c.kind == "tuned" and c.allocator == "hc" and c.trial]
    assert not any("the study's best" in n for n in notes), notes
    assert any("HC's best in the study" in n for n in notes), notes
