"""The importers on small hand-written samples of both formats."""

from __future__ import annotations

import pytest

from hctune.errors import HctuneError
from hctune.trace import open_trace, spec
from hctune.trace.importers import import_trace
from hctune.trace.stats import compute

TEXT = """\
# a Hummingbird-style trace (long and short forms mixed)
Allocate 0x1000 24
Allocate 0x2000 4000
a 0x3000 16
Free 0x1000
Realloc 0x2000 0x4000 5000
r 0x3000 0x3000 32
f 0x4000
Allocate 0x1000 8
Free 0x9999
"""

MTRACE = """\
= Start
@ ./prog:[0x4005d6] + 0x602010 0x18
@ ./prog:[0x4005e4] + 0x602030 0x1000
+ 0x603040 0x10
@ ./prog:[0x4005f2] - 0x602010
@ ./prog:[0x400600] < 0x602030
@ ./prog:[0x400600] > 0x605000 0x2000
- 0x605000
= End
"""


def test_text_import(tmp_path):
    (tmp_path / "t.txt").write_text(TEXT)
    t = open_trace(import_trace(tmp_path / "t.txt", "text", tmp_path / "t.hct"))
    ops = [spec.OP_NAMES[e.op] for e in t]
    assert ops == ["malloc", "malloc", "malloc", "free", "realloc", "realloc", "free",
                   "malloc", "free"]
    st = compute(t)
    assert st["max_live_bytes"] == 16 + 5000 + 16        # after the realloc to 5000
    assert st["reallocs"] == 2 and st["frees"] == 3
    assert st["final_live_objects"] == 2 and st["final_live_bytes"] == 32 + 8
    assert st["anomalies"]["free_unknown"] == 1           # Free 0x9999: counted, not fatal
    assert st["large_requests"] == 2 and st["distinct_sizes"] == 6


def test_mtrace_import(tmp_path):
    (tmp_path / "m.txt").write_text(MTRACE)
    t = open_trace(import_trace(tmp_path / "m.txt", "mtrace", tmp_path / "m.hct"))
    events = list(t)
    assert [spec.OP_NAMES[e.op] for e in events] == ["malloc", "malloc", "malloc", "free",
                                                     "realloc", "free"]
    assert [e.size for e in events] == [0x18, 0x1000, 0x10, 0, 0x2000, 0]
    st = compute(t)
    assert st["max_live_bytes"] == 0x2000 + 0x10          # after the realloc
    assert st["final_live_bytes"] == 0x10
    assert st["anomalies"] == {"free_unknown": 0, "realloc_unknown": 0, "alloc_live": 0}


@pytest.mark.parametrize("fmt, text, where", [
    ("text", "Allocate a\n", ":1"),
    ("text", "Allocate a 10\nAllocate b -5\n", ":2"),
    ("mtrace", "+ 0x10 0x10\n< 0x10\n+ 0x20 0x1\n", ":3"),
    ("mtrace", "+ 0x10 0x10\n< 0x10\n", ":2"),
    ("text", "\n# nothing\n", "no allocation events"),
])
def test_bad_input_is_one_line_and_writes_nothing(tmp_path, fmt, text, where):
    (tmp_path / "in.txt").write_text(text)
    with pytest.raises(HctuneError) as e:
        import_trace(tmp_path / "in.txt", fmt, tmp_path / "out.hct")
    assert where in str(e.value) and "\n" not in str(e.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt"]
