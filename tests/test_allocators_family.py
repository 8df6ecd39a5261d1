"""The allocator families (hctune.allocators): one interface for HC and the allocators
configured through their environment, and a setting completed once on its trip."""

import pickle

import pytest

from hctune import allocators, knobs, render
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
