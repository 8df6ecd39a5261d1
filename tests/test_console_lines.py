"""validate's progress without a terminal: one line per event that a log can grep, never folded
at the pipe's 80 columns (a newcomer's rub: the plan line came out in two pieces)."""

from __future__ import annotations

import io

from rich.console import Console

from hctune.commands._console import progress_bar


def test_lines_in_a_pipe_are_never_folded():
    out = io.StringIO()
    ctx, progress = progress_bar(Console(file=out, width=80, force_terminal=False))
    names = [f"candidate-with-a-long-name-{i}" for i in range(6)]
    with ctx:
        progress({"event": "plan", "candidates": names, "rounds": 5, "warmups": 2})
        progress({"event": "build", "candidate": names[0] + " [x]"})
    lines = out.getvalue().splitlines()
    assert len(lines) == 2, lines
    assert lines[0].startswith("validate: plan: 6 candidates (") and all(n in lines[0] for n in names)
    assert len(lines[0]) > 80 and lines[1].endswith("[x]")
