"""How a program's command is shown in one line: the studies list, an env file's header, a
verdict. A profiled command can hold newlines (an awk or Lua program given inline): shown whole
it breaks a shell comment and buries the list, so each argument keeps its first line and says
how many more it had."""

from __future__ import annotations

import shlex

# a command longer than this is cut (with a count of what was left out); a line, not a page
WIDTH = 120


def one_line(text: str, width: int = WIDTH) -> str:
    """`text` on a single line: a multi-line piece keeps its first line and "[+N lines]", and
    anything over `width` characters ends in "…"."""
    lines = text.splitlines() or [""]
    out = lines[0].rstrip()
    if len(lines) > 1:
        out += f" [+{len(lines) - 1} lines]"
    return out if len(out) <= width else out[:width - 1] + "…"


def command(argv, stdin: str | None = None, width: int = WIDTH) -> str:
    """A command (an argv list, or a string as the trace table stores it) on one line, each
    argument quoted as a shell would need it, multi-line arguments shortened (one_line)."""
    if isinstance(argv, str):
        text = argv
    else:
        text = " ".join(shlex.quote(one_line(a, width)) if "\n" in a else shlex.quote(a)
                        for a in argv)
    if stdin:
        text += f" < {shlex.quote(stdin)}"
    return one_line(text, width)


def comment(text: str, prefix: str = "# ") -> str:
    """Every line of `text` behind the shell comment `prefix`, so no line of it runs."""
    return ("\n" + prefix).join(str(text).splitlines() or [""])
