"""The allocator families (hctune.allocators): one interface for HC and the allocators
configured through their environment, and a setting completed once on its trip."""

import pickle
import re

import pytest

from hctune import allocators, knobs, paths, render
from hctune.errors import HctuneError
from hctune.setting import Setting


@pytest.mark.parametrize("name", list(allocators.families()))
def test_every_family_says_its_setting_the_same_way(name):
    fam = allocators.family(name)
    assert fam.name == name and isinstance(fam, allocators.Family)
    knob = next(iter(fam.knobs()))
    default = fam.defaults()[knob]
    # a --set of its first knob, read back from its key, is the same setting
    items = [f"{knob}={default}"]
    setting = fam.parse(items)
    assert fam.from_key(fam.key(fam.complete(setting)) or None) == fam.complete(setting)
    assert isinstance(fam.describe(fam.complete(setting)), str)
    assert all(isinstance(label, str) for label, _ in fam.seeds("mem"))


def test_a_completed_setting_is_completed_once():
    s = knobs.complete({"QL_HIGH": 128})
    assert isinstance(s, Setting) and knobs.complete(s) is s     # no second pass
    assert render.render_malloc(s) == render.render_malloc(dict(s))
    s["QL_HIGH"] = 64                      # changed: checked again on its next use
    assert knobs.complete(s) is not s and knobs.complete(s)["QL_HIGH"] == 64
    s["QL_HIGH"] = -1
    with pytest.raises(HctuneError):
        knobs.complete(s)
    assert pickle.loads(pickle.dumps(knobs.complete({}))) == knobs.complete({})


def test_hc_is_told_apart_only_by_the_registry():
    assert allocators.is_hc(None) and allocators.is_hc("hc") and not allocators.is_hc("glibc")
    assert allocators.family("hc").compiled and not allocators.family("jemalloc").compiled
    assert allocators.find("kingsley") is None
    with pytest.raises(HctuneError, match="no knobs are declared"):
        allocators.family("kingsley")


def test_no_code_outside_the_families_branches_on_hc_by_name():
    """What differs by family is asked of the family (hctune.allocators.family): outside
    allocators/, no module tests whether an allocator is HC by its name."""
    pkg = paths.ROOT / "tuner" / "hctune"
    name_test = re.compile(r"""(?<!def )\bis_hc\(|[!=]=\s*["']hc["']|["']hc["']\s*[!=]=|"""
                           r"""in \((?:[^)]*, )?["']hc["']""")
    # (db/schema.py: a view that schema 1 stored, in SQL)
    found = [f"{p.relative_to(pkg)}:{i}: {line.strip()}"
             for p in sorted(pkg.rglob("*.py"))
             if p.relative_to(pkg).parts[0] not in ("allocators",) and p.name != "schema.py"
             for i, line in enumerate(p.read_text().splitlines(), 1) if name_test.search(line)]
    assert not found, "ask the family instead:\n  " + "\n  ".join(found)


def test_every_allocator_name_has_a_family():
    """registry.of: a declared family, else a Plain one (kingsley, a library path) that runs
    as it comes under its name."""
    hc, je, plain = allocators.of(None), allocators.of("jemalloc"), allocators.of("/x/libfoo.so")
    assert hc is allocators.family("hc") and je is allocators.family("jemalloc")
    assert (hc.tag, je.tag, plain.tag) == ("HC", "jemalloc", "/x/libfoo.so")
    assert hc.defaults_seed is None and je.defaults_seed == "jemalloc defaults"
    assert not hc.is_defaults(None) and je.is_defaults(None) and plain.is_defaults(None)
    assert hc.as_run(None) == ("hc:generic", None) and plain.as_run({"X": 1}) == ("/x/libfoo.so", None)
    assert hc.fits_tables and hc.validates_top and not je.fits_tables and not je.validates_top
