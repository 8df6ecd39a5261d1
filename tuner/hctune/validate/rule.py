"""The winner rule, said once: which candidate of a validation to recommend, for HC settings and
other allocators alike, and the words a verdict uses for a difference.

A candidate is any row of a validation's summary: `candidate` (its label), `kind` (tuned |
generic | reference | extra), `allocator` (hc, glibc, jemalloc, a library path, ...), `setting`
(its knobs, or None), `median` and `disqualified`. Nothing here assumes the answer is HC: it can
be "keep glibc", "jemalloc" or "jemalloc with X" (a tuned jemalloc setting is kind `tuned`,
allocator `jemalloc`).

The rule (`recommend`):

1. eligible: not disqualified, measured, and within the cap on the other measure: (perf) its
   median peak RSS within the memory limit, (mem, with the study's --max-slowdown) its median
   wall time within the time limit (when no candidate is, all of them stay eligible and the
   caller says so);
2. each candidate has a simplicity: glibc, the allocator the program already has, is the
   simplest (0); any allocator used as it comes -- generic HC, jemalloc, mimalloc, tcmalloc, a
   library given with --lib -- is next (1); a tuned setting of any allocator is last (2);
3. a candidate is *justified* when it wins significantly over every eligible simpler one: the
   95 % interval of the ratio of its median to theirs lies wholly below 1 (paired bootstrap,
   `hctune.validate.stats.ratio_ci`). The simplest eligible candidates are justified as they
   stand;
4. a significant gain must also be worth acting on: the median ratio at least `min_effect` %
   below 1 (MIN_EFFECT by default; `hctune validate --min-effect PCT`). A 0.1 % smaller RSS
   that the intervals call significant keeps the simpler option, and the verdict says "no
   difference worth acting on";
5. the recommendation is the justified candidate with the best median (ties: the simpler, then
   the label). So a setting 1 % faster than generic HC with an interval of -6 to 5 % is not the
   answer: generic HC is, and the verdict says why.

Why MIN_EFFECT is 1 %: changing an allocator is a change to a deployment (a library to ship, a
line to keep), and the intervals of one validation only cover the noise of that session: the
drift between days (another kernel, another input, the page cache) is of the order of a per
cent on RSS and more on time, so a smaller gain is not one a user can expect to keep
(docs/validate.md, "The minimum effect").
"""

from __future__ import annotations

SIMPLEST, AS_IT_COMES, TUNED = 0, 1, 2
MIN_EFFECT = 1.0     # %: the smallest gain worth acting on (see above)


def simplicity(entry: dict) -> int:
    """0: glibc (nothing to change); 1: an allocator as it comes; 2: a tuned setting."""
    if entry["kind"] == "tuned":
        return TUNED
    return SIMPLEST if entry["allocator"] == "glibc" else AS_IT_COMES


def significantly_better(r: dict | None) -> bool:
    """A ratio (a over b, lower is better) whose interval lies wholly below 1."""
    return bool(r) and r["ci"][1] < 1


def worth_acting_on(r: dict | None, min_effect: float = MIN_EFFECT) -> bool:
    """Significantly better, and by at least `min_effect` % at the median."""
    return significantly_better(r) and r["ratio"] <= 1 - min_effect / 100


def recommend(entries: list[dict], measure: str, ratio, cap: float | None = None,
              cap_field: str = "peak_rss_bytes", min_effect: float = MIN_EFFECT) -> dict:
    """The rule above over `entries` (summary rows). `ratio(a, b, measure)` -> {"ratio", "ci"}
    or None: a's median over b's with its interval; `cap`: the largest eligible median of
    `cap_field` (perf: peak RSS in bytes; mem: wall seconds; None: no cap). Returns {"choice": the recommended row or None, "best": the
    eligible row with the best median, "over_cap": rows left out by the cap, "capped": whether
    the cap could be applied (False: none was within it)}."""
    measured = [e for e in entries if not e.get("disqualified")
                and e["median"].get(measure) is not None]
    eligible, over, capped = measured, [], cap is not None
    if cap is not None:
        within = [e for e in measured if (e["median"].get(cap_field) or 0) <= cap]
        over = [e for e in measured if e not in within]
        if within:
            eligible = within
        else:
            capped = False
    out = {"choice": None, "best": None, "over_cap": over, "capped": capped, "small": []}
    if not eligible:
        return out

    def key(e):
        return (e["median"][measure], simplicity(e), e["candidate"])

    def justified(c, worth):
        return all(worth(ratio(c, s, measure)) for s in eligible
                   if simplicity(s) < simplicity(c))
    out["best"] = min(eligible, key=key)
    out["choice"] = min((e for e in eligible
                         if justified(e, lambda r: worth_acting_on(r, min_effect))), key=key)
    # significant, but by less than the minimum effect: kept out, and said so
    out["small"] = [e for e in eligible if e is not out["choice"]
                    and key(e) < key(out["choice"]) and justified(e, significantly_better)]
    return out


# ---- the words for a difference ----

def _decimals(*percents: float) -> int:
    """As few decimals as show the point estimate as non-zero: 7 %, 0.4 %, 0.04 %."""
    p = abs(percents[0])
    return 0 if p >= 0.95 else 1 if p >= 0.095 else 2


def span(a: float, b: float, d: int = 0) -> str:
    """An interval in percent: "4–10 %", or "-6 to 5 %" when it crosses or is below zero; an
    interval that is not a point keeps enough decimals (up to 2) not to read as one ("1.6–2.4
    %", not "2–2 %")."""
    while d < 2 and round(a, 2) != round(b, 2) and round(a, d) == round(b, d):
        d += 1
    a, b = round(a, d) + 0, round(b, d) + 0     # + 0: no "-0"
    fa, fb = (f"{a:.{d}f}", f"{b:.{d}f}")
    return f"{fa}–{fb} %" if a >= 0 else f"{fa} to {fb} %"


def pct(r: dict, better: str = "faster", worse: str = "slower", than: str | None = None) -> str:
    """"7 % faster than glibc (CI 4–10 %)" from a ratio (lower is better) with its interval,
    rounded so a real difference never reads as 0 %, and "no measurable difference" when even
    0.01 % would."""
    ratio, (lo, hi) = r["ratio"], r["ci"]
    diff = (1 - ratio) * 100
    d = _decimals(diff)
    to = f" than {than}" if than else ""
    if round(abs(diff), d) == 0:
        return (f"no measurable difference{' from ' + than if than else ''} "
                f"(CI {span((1 - hi) * 100, (1 - lo) * 100, 2)} {better})")
    if ratio <= 1:
        return f"{abs(diff):.{d}f} % {better}{to} (CI {span((1 - hi) * 100, (1 - lo) * 100, d)})"
    return f"{abs(diff):.{d}f} % {worse}{to} (CI {span((lo - 1) * 100, (hi - 1) * 100, d)})"
