"""The program validation runs: the command given, or the one the study's profiled trace
recorded; one-line errors for a program that cannot run."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from pathlib import Path

from hctune.db import Database
from hctune.errors import HctuneError
from hctune.profile import invocation


@dataclasses.dataclass
class Program:
    argv: list[str]
    cwd: str
    stdin: str | None = None
    server: dict | None = None      # a server: its load, readiness, stop (profile.ServerLoad)

    def to_dict(self) -> dict:
        out = {"argv": list(self.argv), "cwd": self.cwd, "stdin": self.stdin}
        if self.server:
            out["server"] = dict(self.server)
        return out


def check_program(prog: Program) -> Program:
    """One-line errors for a program that cannot run: missing, not executable, bad cwd/stdin."""
    if not prog.argv:
        raise HctuneError("no program to run: hctune validate -- PROGRAM ARGS")
    if not os.path.isdir(prog.cwd):
        raise HctuneError(f"the program's working directory {prog.cwd} no longer exists")
    name = prog.argv[0]
    if os.sep in name:
        p = Path(prog.cwd, name)
        if not p.exists():
            raise HctuneError(f"program not found: {name} (in {prog.cwd})")
        if p.is_dir() or not os.access(p, os.X_OK):
            raise HctuneError(f"not an executable program: {name}")
    elif shutil.which(name) is None:
        raise HctuneError(f"program not found: {name}")
    if prog.stdin is not None and not os.path.isfile(prog.stdin):
        raise HctuneError(f"the program's recorded stdin {prog.stdin} no longer exists")
    return prog


def program_for(db: Database, study_row, argv: list[str] | None = None,
                server: dict | None = None) -> Program:
    """The program to run: `argv` (in the current directory, with stdin when it is a file), or
    the command the study's (latest) profiled trace recorded; a server with its load as
    recorded, or as `server` says (validate --load ...)."""
    if argv:
        inv = invocation(list(argv))
        return check_program(Program(inv["argv"], inv["cwd"], inv["stdin"], server))
    for tid in reversed(json.loads(study_row["trace_ids"])):
        inv = db.invocation(db.trace(tid))
        if inv:
            return check_program(Program(inv["argv"], inv["cwd"], inv["stdin"],
                                         server or inv.get("server")))
    raise HctuneError(f"study {study_row['name']}'s traces carry no command to run (imported, or "
                      "profiled by an older hctune); name it: hctune validate -- PROGRAM ARGS")
