"""Fidelity: the footprint the replay predicts for HC is the footprint HC reports when the
program itself runs on it (LD_PRELOAD, HCMALLOC_STATS), within 2 %, for real programs and
several settings.  This is the premise of the trace-driven method (Hasan & Chang 2006, §4.4):
replaying the calls must reproduce the allocator's behaviour."""

from __future__ import annotations

import pytest

from hctune import build, knobs, replay
from workloads import run_program

# generic (Table 6) and two Table 7 rows that switch different mechanisms off and on
SETTINGS = ("generic", "gawk-mem", "p2c-perf")


def program_footprint(argv, extra, lib, tmp_path) -> int:
    out = tmp_path / "stats.txt"
    run_program(argv, extra, preload=lib, HCMALLOC_STATS=str(out))
    fields = dict(line.split() for line in out.read_text().splitlines() if line.strip())
    return int(fields["footprint"])


@pytest.mark.parametrize("preset", SETTINGS)
def test_replayed_footprint_matches_the_program(replay_programs, replay_traces, preset,  # noqa: F811
                                                tmp_path):
    setting = knobs.preset(preset)
    lib = build.build_hc(setting)
    checked = 0
    for name, (argv, extra) in replay_programs.items():
        real = program_footprint(argv, extra, lib, tmp_path)
        predicted = replay.measure(replay_traces[name], "hc", setting, repeat=1)
        assert predicted["footprint_source"] == "hc_stats"
        err = predicted["footprint_bytes"] / real - 1
        print(f"{preset} {name}: program {real} B, replay {predicted['footprint_bytes']} B, "
              f"{err * 100:+.2f} %")
        assert abs(err) <= 0.02, (name, real, predicted["footprint_bytes"])
        checked += 1
    assert checked >= 2
