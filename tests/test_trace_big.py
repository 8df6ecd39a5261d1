"""Traces bigger than memory: `hctune stats` reads the trace in one pass with bounded memory
(the C reader never maps or reads the file whole), checked under an address-space limit
(RLIMIT_AS) smaller than the trace."""

from __future__ import annotations

import json
import resource
import subprocess
import sys

from hctune.trace import Writer, spec
from hctune.trace.stats import compute
from hctune.trace.writer import tile
from hctune.trace import open_trace

LIMIT = 100 << 20        # the address space of `hctune stats` and of the tool it runs
BLOCKS = 300


def _pattern(path):
    """One round: BLOCKS aligned blocks of large sizes at far-apart addresses (long events:
    about 15 bytes each, so a big file is few events), all freed."""
    with Writer(path, command="tile pattern") as w:
        for i in range(BLOCKS):
            w.event(spec.MEMALIGN, (0x7F00_0000_0000 + i * 0x1_0000_1000) ^ (i * 0x3_3330),
                    (1 << 40) + i % 7, align=1 << 20)
        for i in reversed(range(BLOCKS)):
            w.event(spec.FREE, (0x7F00_0000_0000 + i * 0x1_0000_1000) ^ (i * 0x3_3330))
    return path


def _limit():
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))


def test_stats_of_a_trace_larger_than_the_memory_limit(tmp_path):
    small = _pattern(tmp_path / "one.hct")
    per_round = small.stat().st_size
    rounds = (LIMIT * 5 // 4) // per_round + 1
    big = tile(small, tmp_path / "big.hct", rounds)
    assert big.stat().st_size > LIMIT
    one = compute(open_trace(small))
    r = subprocess.run([sys.executable, "-m", "hctune", "stats", str(big), "--json"],
                       capture_output=True, text=True, preexec_fn=_limit, timeout=300)
    assert r.returncode == 0, r.stderr
    st = json.loads(r.stdout)
    assert st["events"] == rounds * 2 * BLOCKS
    assert st["ops"]["memalign"] == rounds * BLOCKS
    assert st["anomalies"] == {"free_unknown": 0, "realloc_unknown": 0, "alloc_live": 0}
    assert st["max_live_bytes"] == one["max_live_bytes"]
    assert st["final_live_bytes"] == 0
    # the Python reader opens it (header and chunk headers: what registering a trace reads)
    # under the same limit
    r = subprocess.run([sys.executable, "-c", "import sys\nfrom hctune.trace import open_trace\n"
                        "print(open_trace(sys.argv[1]).count)", str(big)],
                       capture_output=True, text=True, preexec_fn=_limit, timeout=300)
    assert r.returncode == 0, r.stderr
    assert int(r.stdout) == rounds * 2 * BLOCKS
