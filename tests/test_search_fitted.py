"""The search explores the size classes fitted to its traces (issue 36; search/fitted.py).

A study derives its tables once from its traces, queues each on top of generic HC as a seed,
searches them as one categorical parameter, and keeps the same choices when resumed; a trace
that derives generic classes adds no parameter and no seed.  The replay is the synthetic cost
model of test_search_study.py (the tables come from real trace files; what is checked is the
study's machinery, not the allocator's numbers)."""

import io

import optuna
from rich.console import Console

from hctune import knobs
from hctune.commands import best as best_cmd
from hctune.db import Database
from hctune.search import fitted, results, study
from test_fitted_derive import _trace
from test_search_study import Model

HC = ("hc",)


class FitModel(Model):
    """The model, with a fitted table at the 8-byte grain saving a tenth of the footprint."""

    def __call__(self, path, allocator="hc", setting=None, repeat=3, metric="time"):
        r = super().__call__(path, allocator, setting, repeat, metric)
        if allocator == "hc" and setting and setting.get("FIT_ALIGN8"):
            r = {**r, "footprint_bytes": r["footprint_bytes"] * 0.5,
                 "peak_rss_bytes": r["peak_rss_bytes"] * 0.5}
        return r


def _db(tmp_path, trace):
    path = tmp_path / "hctune.db"
    with Database(path) as d:
        d.add_trace(trace, "cd" * 32, command="fitted-test", events=1)
    return path


def _study(db, name):
    with Database(db) as d:
        return study.load(d, name)[1]


def test_derived_tables_are_seeded_searched_and_kept(tmp_path):
    """2,000 blocks of 392 bytes and 6,000 of 21: two distinct tables (400; 24 and 392 at the
    8-byte grain), both measured as seeds right after generic, the same on a resumed study."""
    trace = _trace(tmp_path / "a.hct", [392] * 2000 + [21] * 6000 + [100_000])
    tables, notes = fitted.derive([trace])
    assert tables == fitted.derive([trace])[0] and notes == []       # deterministic
    assert [k for k, _ in tables] == ["w0", "w0-g8"]
    db = _db(tmp_path, trace)
    m = FitModel()
    opts = dict(allocators=HC, objective="mem", seed=3)
    r = study.run(db, (), study.Options(trials=8, **opts), measure_fn=m)
    st = _study(db, r["study"])
    ts = sorted(study.finished(st), key=lambda t: t.number)
    assert [t.user_attrs.get("seed") for t in ts[:3]] == \
        ["generic", "generic + fitted w0", "generic + fitted w0-g8"]
    assert st.user_attrs[fitted.STUDY_ATTR] == [[k, v] for k, v in tables]
    # the fitted seed's stored setting carries the table; the others' the generic classes
    s1, s2 = study.trial_setting(ts[1]), study.trial_setting(ts[2])
    assert (s1["FIT_1"], s1["FIT_2"], s1["FIT_ALIGN8"]) == (400, 0, 0)
    assert (s2["FIT_1"], s2["FIT_2"], s2["FIT_ALIGN8"]) == (24, 392, 1)
    assert knobs.diff_from(s1, study.trial_setting(ts[0])) == {"FIT_1": 400}
    assert all(t.params[fitted.PARAM] == "none" for t in ts[3:] if t.user_attrs.get("seed"))
    assert ("hc", knobs.key(s2)) in m.calls
    # one categorical dimension, its choices fixed for the study
    dist = ts[-1].distributions[fitted.PARAM]
    assert isinstance(dist, optuna.distributions.CategoricalDistribution)
    assert list(dist.choices) == ["none", "w0", "w0-g8"]
    # resumed: the same choices, the seeds not queued again
    again = study.run(db, (), study.Options(trials=12, **opts), measure_fn=m)
    st = _study(db, again["study"])
    assert st.user_attrs[fitted.STUDY_ATTR] == [[k, v] for k, v in tables]
    done = study.finished(st)
    assert len(done) == 12
    assert all(list(t.distributions[fitted.PARAM].choices) == ["none", "w0", "w0-g8"]
               for t in done)
    labels = [t.user_attrs.get("seed") for t in done if t.user_attrs.get("seed")]
    assert len(labels) == len(set(labels))
    # `best` names a setting's fitted classes and where they come from
    b = results.best(db, again["study"], measure_fn=m)
    assert b["seed"] == "generic + fitted w0-g8"
    assert b["fitted_classes"] == fitted.describe(s2)
    out = io.StringIO()
    best_cmd.show(b, Console(file=out, width=200))
    assert "size classes: fitted size classes 24, 392 bytes (8-byte grain), derived from the " \
        "study's traces" in out.getvalue()
    assert fitted.describe(study.trial_setting(ts[0])) is None


def test_a_trace_that_derives_generic_adds_nothing(tmp_path):
    """Only huge blocks: generic classes, with a note; no parameter, no fitted seed."""
    trace = _trace(tmp_path / "h.hct", [1 << 20] * 5, free_all=False)
    notes = []
    db = _db(tmp_path, trace)
    r = study.run(db, (), study.Options(allocators=HC, objective="mem", trials=4, seed=1),
                  measure_fn=Model(), notice=notes.append)
    st = _study(db, r["study"])
    assert st.user_attrs[fitted.STUDY_ATTR] == []
    assert any("fitted size classes: none" in n and "above the small pages" in n for n in notes)
    for t in study.finished(st):
        assert fitted.PARAM not in t.params
        assert "fitted" not in (t.user_attrs.get("seed") or "")
        assert fitted.describe(study.trial_setting(t)) is None


def test_a_sampled_small_page_limit_below_a_table_keeps_the_classes_it_can_serve(tmp_path):
    # a search sampled SMALL_MAX=256 with a table reaching 1,040 bytes: malloc.c did not compile
    # (hc_fit.c's check) and the trial failed; the classes the pages cannot serve are left out
    import subprocess

    from hctune.render import render_malloc
    tables = {"w0-g8": {"FIT_1": 24, "FIT_2": 48, "FIT_3": 1040, "FIT_4": 2048,
                        **{f"FIT_{i}": 0 for i in range(5, 9)}, "FIT_ALIGN8": 1}}
    generic = knobs.preset("generic")
    for small_max, kept, align8 in ((256, [24, 48], 1), (2048, [24, 48, 1040, 2048], 1),
                                    (16, [], 0), (0, [], 0)):
        s = fitted.apply({**generic, "SMALL_MAX": small_max}, "w0-g8", tables)
        assert [s[f"FIT_{i}"] for i in range(1, 9) if s[f"FIT_{i}"]] == kept, (small_max, s)
        assert s["FIT_ALIGN8"] == align8 and s["SMALL_MAX"] == small_max
    src = tmp_path / "malloc.c"
    src.write_text(render_malloc(fitted.apply({**generic, "SMALL_MAX": 256}, "w0-g8", tables)))
    cc = subprocess.run(["cc", "-fsyntax-only", "-std=gnu11", str(src)], capture_output=True,
                        text=True)
    assert cc.returncode == 0, cc.stderr[-2000:]
