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


def test_a_failed_trial_in_a_pipe_is_one_line_not_a_traceback():
    # search's plain-lines progress had no console of its own: the first failed trial of a search
    # writing to a pipe ended the search with an AttributeError
    import time

    import optuna

    from hctune.commands import search
    from hctune.search import options

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    out = io.StringIO()
    _, progress = search._bar(options.Options(objective="mem", trials=4, timeout=None),
                              Console(file=out, width=80, force_terminal=False))
    why = "HC failed to compile (cc -O2): " + "x" * 120
    progress(optuna.create_study(), 1, 4, time.monotonic(), (3, why))
    lines = out.getvalue().splitlines()
    assert lines[0] == f"trial 3 failed: {why}", lines
    assert lines[1].startswith("search: 1/4 trials (0 seeds, 0 sampled, 0 pruned, 0 failed)")
