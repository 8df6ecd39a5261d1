"""The knobs and presets of configs/ (Hasan & Chang 2006, Tables 6 and 7)."""

import pytest

from hctune import knobs
from hctune.errors import HctuneError


def test_generic_preset_is_table_6():
    g = knobs.preset("generic")
    assert (g["MONITOR"], g["COALESCE"], g["COALESCE_QL"], g["COALESCE_IN_FREE"], g["SPLIT"],
            g["QL_HIGH"]) == (1, 1, 1, 0, 1, 72)
    # The paper's fixed numbers (§3.8-§3.11) are the defaults.
    assert g["COALESCE_RATIO"] == 1.06 and g["QL_PREALLOC"] == 100
    assert g["HEAP_UNIT"] == 8192 and g["MMAP_THRESHOLD"] == 102400
    assert g["IN_FREE_BLOCKS"] == 10 and g["IN_FREE_HEAP"] == 102400


def test_table_7_rows_present():
    names = knobs.preset_names()
    for prog in ("ghostscript", "espresso", "p2c", "gawk", "cfrac", "electric", "groff"):
        assert f"{prog}-mem" in names and f"{prog}-perf" in names
    assert knobs.preset("gawk-mem")["QL_HIGH"] == 264
    assert knobs.preset("p2c-perf")["SPLIT"] == 0


def test_resolve_with_overrides():
    s = knobs.resolve("cfrac-perf", ["ql_high=512", "COALESCE_RATIO=1.5"])
    assert s["QL_HIGH"] == 512 and s["COALESCE_RATIO"] == 1.5 and s["MONITOR"] == 0


@pytest.mark.parametrize("item, message", [
    ("QL_HIGH=8", "outside its range"),
    ("QL_HIGH=1024", "outside its range"),
    ("QL_HIGH=100", "multiple of 8"),
    ("SPLIT=2", "boolean"),
    ("NOPE=1", "unknown knob"),
    ("QL_HIGH", "KNOB=VALUE"),
    ("QL_HIGH=abc", "not an integer"),
])
def test_bad_settings_are_one_line_errors(item, message):
    with pytest.raises(HctuneError, match=message):
        knobs.parse_sets([item])


def test_unknown_preset():
    with pytest.raises(HctuneError, match="unknown preset"):
        knobs.preset("nope")


def test_key_is_canonical_and_complete():
    a = knobs.key({"QL_HIGH": 128})
    b = knobs.key(knobs.complete({"QL_HIGH": 128}))
    assert a == b and a.count("=") == len(knobs.knobs())


def test_every_knob_has_documentation_and_search_rule():
    for k in knobs.knobs().values():
        # The paper's knobs cite its section; the engine's own (threads, OS) say which mechanism.
        assert k.why and (k.section.startswith("§") or k.section.startswith("engine: "))
        assert k.search in {"fixed", "choice", "int", "float", "log", "pow2", "log_or_zero"}
        if k.type != "bool":
            assert k.min is not None and k.max is not None and k.min <= k.default <= k.max


def test_thread_knobs_are_declared_for_the_threaded_search():
    """The thread cache's knobs carry `threads = true` and a search rule (docs/replay.md:
    searched only on multi-threaded traces, measured by the threaded replay); 0 turns it off."""
    table = knobs.knobs()
    for name in ("TCACHE_COUNT", "TCACHE_MAX"):
        k = table[name]
        assert k.threads and k.search != "fixed" and k.section == "engine: thread cache"
    assert table["TCACHE_COUNT"].search == "log_or_zero" and table["TCACHE_COUNT"].min == 0
    assert table["TCACHE_COUNT"].search_max == 256
    assert table["TCACHE_MAX"].search == "int" and table["TCACHE_MAX"].search_step == 16
    arenas = table["ARENAS"]
    assert arenas.threads and arenas.search != "fixed" and arenas.single_thread_value == 1
    for name in ("REMOTE_KEEP", "REMOTE_BATCH"):  # other threads' frees (hc_remote.c)
        k = table[name]
        assert k.threads and k.search != "fixed" and k.min == 0 and k.default == 0
    assert not any(k.threads for n, k in table.items()
                   if not n.startswith(("TCACHE_", "REMOTE_")) and n != "ARENAS")
