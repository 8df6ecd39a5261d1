"""The winner rule and the verdict's words (hctune.validate.rule, summary), on made-up runs: a
winner must win significantly over every simpler option, else the simpler option is the answer;
the verdict names any reference that beat the recommendation, with its interval; differences
are rounded so a real one never reads "0 %"; the rule does not assume the answer is HC."""

from hctune import knobs
from hctune import validate as _validate
from hctune.validate import rule

ROUNDS = 10
# a fixed pattern of noise per round (one burst of load slows round 3 for everyone)
NOISE = [0.00, 0.01, -0.01, 0.05, 0.00, -0.005, 0.005, 0.01, -0.01, 0.0]


def cand(label, kind="reference", allocator=None, origin=None):
    hc = kind in ("tuned", "generic")
    return _validate.Candidate(label, kind, allocator or ("hc" if hc else label),
                               setting=knobs.complete({}) if hc else None,
                               trial=7 if kind == "tuned" else None, origin=origin)


def runs_for(numbers, jitter=None):
    """numbers: {label: (wall s, RSS MiB)}; jitter: {label: [per-round extra factor]}."""
    out = []
    for rnd in range(ROUNDS):
        for label, (wall, rss) in numbers.items():
            j = (jitter or {}).get(label, [0.0] * ROUNDS)[rnd]
            out.append({"candidate": label, "round": rnd,
                        "wall_s": wall * (1 + NOISE[rnd] + j), "user_s": wall, "sys_s": 0.0,
                        "peak_rss_bytes": int(rss * (1 + j) * 2**20), "problem": None})
    return out


WILD = [0.08, -0.07, 0.06, -0.08, 0.07, -0.06, 0.08, -0.07, 0.05, -0.05]


def test_a_best_that_is_not_significant_gives_the_simpler_option():
    """jq's case: tuned #1 1 % faster than generic HC with an interval across 0: generic HC is
    the answer (and what emit writes), and the verdict says why."""
    cands = [cand("tuned #1", "tuned"), cand("hc generic", "generic"), cand("glibc")]
    runs = runs_for({"tuned #1": (0.99, 100), "hc generic": (1.0, 100), "glibc": (1.2, 100)},
                    {"tuned #1": WILD})
    s = _validate.summarize(cands, runs, "perf")
    assert s["winner"]["candidate"] == "hc generic" and not s["significant"]
    assert s["recommendation"]["candidate"] == "hc generic"
    assert s["verdict"].startswith("use generic HC: 17 % faster than glibc")
    assert "tuned #1 (HC, trial 7) was 0.5 % faster than generic HC (CI -" in s["verdict"]
    assert "not a significant difference, so the simpler option stands" in s["verdict"]


def test_a_significant_tuned_setting_wins():
    cands = [cand("tuned #1", "tuned"), cand("hc generic", "generic"), cand("glibc")]
    runs = runs_for({"tuned #1": (0.80, 100), "hc generic": (1.0, 100), "glibc": (1.1, 100)})
    s = _validate.summarize(cands, runs, "perf")
    assert s["winner"]["candidate"] == "tuned #1" and s["significant"]
    assert s["verdict"].startswith("use tuned #1 (HC, trial 7): 20 % faster than generic HC "
                                   "(CI 20–20 %), 27 % faster than glibc (CI ")


def test_a_faster_reference_is_named_and_can_be_the_answer():
    """The C program's case: tuned #2 beats generic HC, but mimalloc, jemalloc and tcmalloc,
    untuned, were faster still: the recommendation is mimalloc; emit still writes tuned #2 and
    the verdict says so, naming every faster reference with its interval."""
    cands = [cand("tuned #2", "tuned"), cand("hc generic", "generic"), cand("glibc"),
             cand("jemalloc"), cand("mimalloc"), cand("tcmalloc")]
    runs = runs_for({"tuned #2": (0.581, 100), "hc generic": (0.785, 100), "glibc": (0.8, 100),
                     "jemalloc": (0.566, 100), "mimalloc": (0.514, 100),
                     "tcmalloc": (0.5661, 100)})
    s = _validate.summarize(cands, runs, "perf")
    assert s["winner"]["candidate"] == "tuned #2"
    assert s["recommendation"] == {"candidate": "mimalloc", "kind": "reference",
                                   "allocator": "mimalloc", "setting": None, "trial": None,
                                   "simplicity": 1}
    v = s["verdict"]
    assert v.startswith("use mimalloc: 36 % faster than glibc (CI ")
    assert "jemalloc was 10 % slower than mimalloc" not in v      # only those that beat it
    assert "the best HC setting, tuned #2 (HC, trial 7), is what emit writes: 13 % slower " \
           "than mimalloc (CI 13–13 %)" in v
    # the HC-only view: with mimalloc gone, jemalloc and tcmalloc still beat tuned #2
    s = _validate.summarize([c for c in cands if c.label != "mimalloc"], runs, "perf")
    assert s["recommendation"]["candidate"] == "jemalloc"
    assert "tcmalloc was 0.02 % slower" not in s["verdict"]
    s = _validate.summarize([c for c in cands if c.label not in ("mimalloc", "jemalloc")], runs,
                            "perf")
    assert s["recommendation"]["candidate"] == "tcmalloc"


def test_every_reference_that_beat_the_recommendation_is_named():
    """A reference with a better median but an interval across 1 vs glibc is not recommended,
    yet the verdict names it, with its interval, as not significant."""
    cands = [cand("hc generic", "generic"), cand("glibc"), cand("jemalloc")]
    runs = runs_for({"hc generic": (1.0, 100), "glibc": (1.0, 100), "jemalloc": (0.98, 100)},
                    {"jemalloc": WILD, "hc generic": [-w for w in WILD]})
    s = _validate.summarize(cands, runs, "perf")
    assert s["recommendation"]["candidate"] == "glibc"
    assert s["verdict"].startswith("keep glibc: no allocator was significantly faster")
    assert "jemalloc was 2 % faster than glibc (CI -" in s["verdict"]


def test_small_differences_are_rounded_honestly():
    r = {"ratio": 0.996, "ci": [0.993, 0.999]}
    assert rule.pct(r, "smaller", "larger") == "0.4 % smaller (CI 0.1–0.7 %)"
    assert rule.pct({"ratio": 1.07, "ci": [1.04, 1.10]}) == "7 % slower (CI 4–10 %)"
    assert rule.pct({"ratio": 0.99, "ci": [0.94, 1.06]}) == "1 % faster (CI -6 to 6 %)"
    # an interval is never printed as a point it is not (issue 32's "CI 2–2 %")
    assert rule.pct({"ratio": 0.98, "ci": [0.976, 0.984]}, "smaller", "larger") == \
        "2 % smaller (CI 1.6–2.4 %)"
    assert rule.pct({"ratio": 1.0, "ci": [0.9999, 1.0001]}).startswith("no measurable difference")
    cands = [cand("tuned #1", "tuned"), cand("hc generic", "generic"), cand("glibc")]
    runs = runs_for({"tuned #1": (1.0, 99.6), "hc generic": (1.0, 100), "glibc": (1.0, 120)})
    s = _validate.summarize(cands, runs, "mem", min_effect=0)   # the words, not the rule
    assert s["winner"]["candidate"] == "tuned #1"
    assert "0.4 % smaller" in s["verdict"] and " 0 % " not in s["verdict"]
    assert "beats" not in s["verdict"]


def test_the_rule_does_not_assume_hc():
    """A tuned jemalloc setting must beat jemalloc as it comes, like a tuned HC setting generic
    HC; an allocator as it comes must beat glibc."""
    rows = []
    for label, kind, alloc, med in (("glibc", "reference", "glibc", 1.0),
                                    ("jemalloc", "reference", "jemalloc", 0.9),
                                    ("jemalloc tuned", "tuned", "jemalloc", 0.7)):
        rows.append({"candidate": label, "kind": kind, "allocator": alloc, "setting": None,
                     "median": {"wall_s": med, "peak_rss_bytes": 1}, "disqualified": None})
    sig = {"ratio": 0.8, "ci": [0.7, 0.9]}
    noisy = {"ratio": 0.8, "ci": [0.5, 1.1]}
    pick = rule.recommend(rows, "wall_s", lambda a, b, m: sig)
    assert pick["choice"]["candidate"] == "jemalloc tuned"
    pick = rule.recommend(rows, "wall_s", lambda a, b, m: noisy)
    assert pick["choice"]["candidate"] == "glibc" and pick["best"]["candidate"] == "jemalloc tuned"
    pick = rule.recommend(rows, "wall_s",
                          lambda a, b, m: noisy if a["candidate"] == "jemalloc tuned" else sig)
    assert pick["choice"]["candidate"] == "jemalloc"


def test_a_setting_of_the_other_objective_that_dominates_is_shown():
    """perf validation: the mem study's best is as fast and 23 % smaller than the answer."""
    origin = {"study": "mem-study", "objective": "mem", "trial": 3}
    cands = [cand("tuned #1", "tuned"), cand("mem best", "tuned", origin=origin),
             cand("hc generic", "generic"), cand("glibc")]
    runs = runs_for({"tuned #1": (0.70, 130), "mem best": (0.705, 100),
                     "hc generic": (1.0, 130), "glibc": (1.1, 120)},
                    {"mem best": WILD})
    s = _validate.summarize(cands, runs, "perf", memory_limit=None)
    assert s["recommendation"]["candidate"] == "tuned #1"
    assert "consider mem best (HC, trial 3 of study mem-study): " in s["verdict"]
    assert "and 23 % smaller than tuned #1 (CI" in s["verdict"]


def test_memory_limit_leaves_out_candidates_of_any_kind():
    cands = [cand("tuned #1", "tuned"), cand("tuned #2", "tuned"), cand("hc generic", "generic"),
             cand("glibc"), cand("tcmalloc")]
    runs = runs_for({"tuned #1": (0.50, 200), "tuned #2": (0.80, 105), "hc generic": (1.0, 100),
                     "glibc": (1.1, 100), "tcmalloc": (0.4, 300)})
    s = _validate.summarize(cands, runs, "perf")
    assert s["winner"]["candidate"] == "tuned #2" and s["significant"]
    assert s["recommendation"]["candidate"] == "tuned #2"
    assert any(n.startswith("tuned #1 left out") for n in s["notes"])
    assert any(n.startswith("tcmalloc left out") for n in s["notes"])
    over = {e["candidate"] for e in s["candidates"] if e.get("over_memory_limit")}
    assert over == {"tuned #1", "tcmalloc"}
    assert "tcmalloc was 50 % faster than tuned #2 (CI 50–50 %) but over the " \
           "memory limit" in s["verdict"]


def test_a_mem_study_with_max_slowdown_keeps_its_time_limit_in_the_real_runs():
    """mem with the study's --max-slowdown 100: jemalloc tuned, 30 % smaller but 5x glibc's
    time in the real runs, is left out and a note says why; the smallest of the rest (all
    within 2x glibc's time) is the answer. Without the limit, jemalloc tuned wins."""
    cands = [_validate.Candidate("jemalloc tuned", "tuned", "jemalloc", setting={"tcache": False},
                                 trial=3), cand("tuned #1", "tuned"),
             cand("hc generic", "generic"), cand("glibc"), cand("jemalloc")]
    runs = runs_for({"jemalloc tuned": (5.0, 70), "tuned #1": (1.5, 85),
                     "hc generic": (1.0, 100), "glibc": (1.0, 100), "jemalloc": (0.9, 95)})
    s = _validate.summarize(cands, runs, "mem")
    assert s["recommendation"]["candidate"] == "jemalloc tuned" and s["time_limit_pct"] is None
    s = _validate.summarize(cands, runs, "mem", max_slowdown=100)
    assert s["recommendation"]["candidate"] == "tuned #1" and s["time_limit_pct"] == 100
    assert [e["candidate"] for e in s["candidates"] if e.get("over_time_limit")] == \
        ["jemalloc tuned"]
    assert any(n.startswith("jemalloc tuned left out of the choice: wall time 5.00x glibc's, "
                            "over the +100 % limit") for n in s["notes"]), s["notes"]
    assert s["verdict"].startswith("use tuned #1 (HC, trial 7): 15 % smaller than generic HC")
    # a perf study's limits are unchanged by it
    p = _validate.summarize(cands, runs, "perf", max_slowdown=100)
    assert p["time_limit_pct"] is None and not any(e.get("over_time_limit")
                                                   for e in p["candidates"])


def test_compare_and_validate_tables_keep_every_number_at_80_columns():
    """Rendered at 80 columns (a pipe, a CI log): no ellipsis, every number whole."""
    import io

    from rich.console import Console

    from hctune import compare
    from hctune.commands import validate as vcmd
    rows = [{"label": label, "time_ns_per_op": 123456.7, "time_norm": 1.234, "spread": 0.12,
             "peak_rss_bytes": 987654321, "memory_norm": 1.056,
             "hc_footprint_bytes": 876543210 if label.startswith("hc") else None,
             "fragmentation": 0.4321}
            for label in ("glibc", "jemalloc", "mimalloc", "tcmalloc", "kingsley",
                          "hc:generic-with-a-long-name")]
    res = {"baseline": "glibc", "trace": "a-rather-long-trace-name.hct", "ops": 123456789,
           "max_live_bytes": 10**9, "rounds": 5, "rows": rows}
    cands = [cand("tuned #1", "tuned"), cand("a library with a long label", "extra"),
             cand("hc generic", "generic"), cand("glibc")]
    s = _validate.summarize(cands, runs_for({"tuned #1": (12.3456, 1000),
                                             "a library with a long label": (11.0, 1200),
                                             "hc generic": (12.5, 1100), "glibc": (13.0, 999)},
                                            {"tuned #1": WILD}), "perf")
    s.update(study="s", program={"argv": ["./app"], "stdin": None}, runs=ROUNDS)
    for render, numbers in ((lambda c: c.print(compare.table(res)), ["123456.7", "964,506",
                                                                     "855,999", "0.43"]),
                            (lambda c: vcmd.show(s, c), [])):
        buf = io.StringIO()
        render(Console(file=buf, width=80, force_terminal=False))
        out = buf.getvalue()
        assert "…" not in out and max(map(len, out.splitlines())) <= 80, out
        for n in numbers:
            assert n in out, (n, out)
    for c in s["candidates"]:
        r = c["vs_glibc"].get("wall_s")
        if r:
            assert f"{r['ci'][0]:.2f}–{r['ci'][1]:.2f}" in out, out


def test_report_summary_says_what_to_use_how_much_how_sure():
    """The report's first lines, from a validation whose answer is another allocator, one whose
    answer is glibc, and a study never validated (said to be a prediction)."""
    from hctune import report
    cands = [cand("tuned #2", "tuned"), cand("hc generic", "generic"), cand("glibc"),
             cand("mimalloc")]
    runs = runs_for({"tuned #2": (0.581, 100), "hc generic": (0.785, 100), "glibc": (0.8, 100),
                     "mimalloc": (0.514, 90)})
    v = _validate.summarize(cands, runs, "perf")
    v.update(validation_id=4, runs=ROUNDS, date="2026-01-01")
    data = {"study": "s", "objective": "perf", "metric": "time", "validation": v,
            "best": {"perf": {"trial": 7, "mem": 1.0, "perf": 0.7, "changed": "QL_HIGH=512",
                              "allocator": "hc"}}}
    s = report.summary(data)
    assert s["use"] == "use mimalloc" and s["validated"]
    assert s["saves"].startswith("10 % smaller than glibc (CI ") and "36 % faster than glibc" \
        in s["saves"]
    assert "10 interleaved real runs" in s["sure"] and s["emit"].startswith("no HC file needed")
    v = _validate.summarize(cands[:3], runs, "mem")
    v.update(validation_id=5, runs=ROUNDS, date="2026-01-01")
    s = report.summary({**data, "validation": v})
    assert s["use"] == "keep glibc" and s["saves"] == "nothing measurable against glibc"
    s = report.summary({**data, "validation": None})
    assert s["use"] == "trial 7 (HC; changed from generic: QL_HIGH=512)" and not s["validated"]
    assert "a prediction only" in s["sure"]


def test_time_measure_cpu_chooses_on_the_programs_cpu_time():
    """perf with --time-measure cpu: the rule chooses on user + sys, not on the wall time. Here
    the wall times say load (the tuned setting's runs waited for a core), the CPU times say it
    does 15 % less work: wall keeps glibc, cpu recommends the tuned setting and says so in CPU
    time; the memory limit still applies."""
    cands = [cand("tuned #1", "tuned"), cand("hc generic", "generic"), cand("glibc"),
             cand("mimalloc")]
    runs = runs_for({"tuned #1": (1.0, 100), "hc generic": (1.0, 100), "glibc": (1.0, 100),
                     "mimalloc": (1.0, 200)}, {"tuned #1": WILD})
    cpu = {"tuned #1": 0.85, "hc generic": 1.0, "glibc": 1.0, "mimalloc": 0.7}
    for r in runs:
        r["user_s"], r["sys_s"] = cpu[r["candidate"]] * 0.9, cpu[r["candidate"]] * 0.1
    wall = _validate.summarize(cands, runs, "perf")
    assert wall["measure"] == "wall_s" and wall["time_measure"] == "wall"
    assert wall["recommendation"]["candidate"] == "glibc"
    s = _validate.summarize(cands, runs, "perf", time_measure="cpu")
    assert s["measure"] == "cpu_s" and s["time_measure"] == "cpu"
    assert s["recommendation"]["candidate"] == "tuned #1" and s["significant"]
    assert s["verdict"].startswith("use tuned #1 (HC, trial 7): 15 % faster in CPU time than "
                                   "generic HC")
    # mimalloc is faster still, but twice glibc's peak RSS: over the memory limit
    assert any(n.startswith("mimalloc left out of the choice") for n in s["notes"])
    assert _validate.summarize(cands, runs, "mem", time_measure="cpu")["time_measure"] is None


def test_a_gain_under_the_minimum_effect_keeps_the_simpler_option():
    """Issue 32's 0.1 % smaller RSS (0.4 MiB of 189), significant on steady runs: not worth
    acting on under the 1 % default, so glibc stays and the verdict says why; with
    --min-effect 0.05 the same runs recommend it."""
    cands = [cand("jemalloc"), cand("glibc")]
    runs = runs_for({"jemalloc": (1.0, 188.6), "glibc": (1.0, 189.0)})
    s = _validate.summarize(cands, runs, "mem")
    assert s["recommendation"]["candidate"] == "glibc" and s["min_effect_pct"] == 1.0
    assert "significant but under the 1 % minimum effect, no difference worth acting on" \
        in s["verdict"]
    assert s["verdict"].startswith("keep glibc: no allocator was significantly smaller on this "
                                   "program by 1 % or more")
    s = _validate.summarize(cands, runs, "mem", min_effect=0.05)
    assert s["recommendation"]["candidate"] == "jemalloc"
