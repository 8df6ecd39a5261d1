"""The harness's own cost, next to what it measures.

Two views (docs/replay.md, "Harness overhead"):
  - time: the whole replay with the bump allocator (allocator/replay/bump.c, a few instructions
    per call on warm memory) against the whole replay with glibc, interleaved rounds, medians:
    a ratio of wall times, so in bench/replay_overhead.py, not here;
  - instructions: callgrind's self count of the replay loop (hcr_replay_once: dispatch, slot
    array, page touching) against glibc's whole replay; deterministic: this test.
The brief's target was "bump replay <= 10 % of glibc's time".  That is out of reach for any
harness that calls malloc once per op: glibc needs only ~110-140 instructions per op on these
traces, and one loop iteration (load the op, dispatch, store the slot, touch the block) is ~20.
The bounds below are what the harness achieves with a margin; the measured figures are printed
(pytest -s) and recorded in docs/replay.md.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from hctune import paths, replay

def _self_instructions(callgrind_out: Path, function: str) -> int:
    """Self cost (Ir) of one function, read from callgrind's output format directly: cost lines
    after `fn=` belong to it, except the one after each `calls=` (a callee's inclusive cost)."""
    names, current, total, after_call = {}, None, 0, False
    for line in callgrind_out.read_text(errors="replace").splitlines():
        if line.startswith("fn="):
            m = re.match(r"fn=\((\d+)\)(?: (.*))?", line)
            if m:
                if m.group(2):
                    names[m.group(1)] = m.group(2)
                current = names.get(m.group(1))
            else:
                current = line[3:]
            after_call = False
        elif line.startswith("cfn="):  # a callee's name may be defined here first
            m = re.match(r"cfn=\((\d+)\) (.*)", line)
            if m:
                names[m.group(1)] = m.group(2)
        elif line.startswith("calls="):
            after_call = True
        elif line and (line[0].isdigit() or line[0] in "+-*"):
            if current == function and not after_call:
                total += int(line.split()[-1])
            after_call = False
    if not total:
        raise AssertionError(f"{function} not in {callgrind_out}")
    return total


@pytest.mark.skipif(not shutil.which("valgrind"),
                    reason="valgrind not installed (.ci/run installs it)")
def test_loop_instructions_are_a_small_share_of_glibc(replay_traces):  # noqa: F811
    trace = replay_traces.get("python3") or next(iter(replay_traces.values()))
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "cg.out"
        env = dict(os.environ)
        env.pop("LD_PRELOAD", None)
        subprocess.run(["valgrind", "--tool=callgrind", "--instr-atstart=no",
                        f"--callgrind-out-file={out}", str(paths.BUILD / "hcreplay"), str(trace),
                        "--repeat", "1", "--json"], env=env, capture_output=True, check=True)
        loop = _self_instructions(out, "hcr_replay_once")
        total = replay._callgrind_total(out)
    ops = replay.measure(trace, "glibc", repeat=1)["ops"]
    print(f"loop {loop / ops:.1f} instructions/op of glibc's {total / ops:.1f} "
          f"({loop / total * 100:.1f} %)")
    assert loop / ops <= 25
    assert loop / total <= 0.25
