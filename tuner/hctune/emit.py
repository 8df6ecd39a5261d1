"""`hctune emit`: the tuned allocator as one malloc.c (with where its setting came from), and
optionally its shared library, plus Make and CMake snippets to pull it into a build.

Every file is written to a temporary name and renamed, so an interrupted emit leaves either the
old file or the new one, never half of one.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import shlex
import subprocess
import tempfile
from pathlib import Path

from hctune import VERSION_TEXT
from hctune import knobs as _knobs
from hctune import templating
from hctune.db import Database
from hctune.errors import HctuneError
from hctune.files import write_atomic

SO_CFLAGS = ["-O2", "-fPIC", "-shared"]
SO_LIBS = ["-lpthread"]




def compile_so(source: Path, out: Path, cc: str | None = None) -> list[str]:
    """Compile `source` into the shared library `out` (atomically); returns the command."""
    cc = cc or os.environ.get("CC", "cc")
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".so", dir=out.parent)
    os.close(fd)
    cmd = [*shlex.split(cc), *SO_CFLAGS, str(source), "-o", tmp, *SO_LIBS]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            lines = (proc.stderr or proc.stdout).strip().splitlines()
            raise HctuneError(f"compiling {source.name} failed: "
                              f"{lines[0] if lines else 'exit ' + str(proc.returncode)}")
        os.chmod(tmp, 0o755)
        os.replace(tmp, out)
    except FileNotFoundError:
        raise HctuneError(f"no C compiler {cc!r}; set CC") from None
    finally:
        Path(tmp).unlink(missing_ok=True)
    return cmd


def _measured(trial, metric: str) -> str:
    """One line per trace: the numbers the search measured for this setting."""
    field = "instructions_per_op" if metric == "instructions" else "time_ns_per_op"
    unit = "instructions/op" if metric == "instructions" else "ns/op"
    lines = []
    for e in trial.user_attrs.get("per_trace", []):
        lines.append(f"trace #{e['trace_id']}: footprint {e['footprint_bytes']:.0f} bytes "
                     f"({e['mem_ratio']:.3f}x glibc), {e[field]:.2f} {unit} "
                     f"({e['perf_ratio']:.3f}x glibc)")
    return "; ".join(lines)


def choose_setting(db_path, study: str | None, objective: str | None, preset: str | None,
                   sets) -> tuple[dict, dict]:
    """(setting, provenance) from a study's best trial or a preset, `--set` applied last."""
    sets = list(sets or ())
    overrides = _knobs.parse_sets(sets)
    date = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    prov = {}
    if preset is not None:
        if study is not None:
            raise HctuneError("--preset and --study choose the setting two ways; give one")
        setting = _knobs.resolve(preset, sets)
        prov.update(trace="none (a preset, not tuned to a trace)", objective=f"preset {preset}",
                    source=_knobs.preset_source(preset), measured="not measured by hctune",
                    date=date, hctune=VERSION_TEXT)
        return setting, prov
    from hctune import validate as _validate
    from hctune.search import results  # only a study-based emit needs Optuna
    from hctune.search import study as _study
    asked = objective
    with Database(db_path) as db:
        try:
            row, st, objective, trial = results.chosen(db, study, objective)
        except HctuneError as e:
            if study is None and "no study" in str(e):
                raise HctuneError("no study in the database: run `hctune search` first, or emit "
                                  "a paper setting with --preset generic") from None
            raise
        traces = results.study_traces(db, row)
        real = _validate.validated(db, row, asked)
    metric = json.loads(row["options_json"] or "{}").get("metric", "time")
    setting = _study.trial_setting(trial)
    if real is not None:
        # the real runs' winner replaces the replay's best
        setting = _validate.winner_setting(real)
        n = real["winner"]["trial"]
        trial = next((t for t in _study.finished(st) if t.number == n), None) if n is not None \
            else None
    setting.update(overrides)
    setting = _knobs.complete(setting)
    measured = _measured(trial, metric) if trial is not None else "not measured by the study"
    if overrides:
        measured = f"as searched, before --set {' '.join(sets)}: {measured}"
    prov.update(trace=", ".join(f"#{t.id} {t.path}" + (f" ({t.command})" if t.command else "")
                                for t in traces),
                objective=f"{objective} (perf metric: {metric}); study {row['name']}, "
                          + (f"trial {trial.number}" if trial is not None else "generic setting"),
                source=(f"seeded from {trial.user_attrs['seed']}"
                        if trial is not None and trial.user_attrs.get("seed")
                        else "found by the Optuna search" if trial is not None
                        else "Hasan & Chang 2006, Table 6"),
                measured=measured)
    if real is not None:
        prov["chosen by"] = (f"real runs: {real['winner']['candidate']} won validation "
                             f"#{real['validation_id']} on {real['measure']}")
        prov.update(_validate.provenance(real))
        rec = real.get("recommendation")
        if rec and rec["candidate"] != real["winner"]["candidate"]:
            prov["recommendation"] = (
                ("keep glibc" if rec["allocator"] == "glibc" and rec["kind"] != "tuned"
                 else f"use {rec['candidate']}")
                + f": the real runs found no HC setting significantly better (this file is the "
                f"best HC setting, {real['winner']['candidate']}; see the verdict)")
    else:
        prov["validated"] = "not validated in real runs (hctune validate)"
    prov.update(date=date, hctune=VERSION_TEXT)
    return setting, prov


def emit(db_path, out, study=None, objective=None, preset=None, sets=(), so=None) -> dict:
    """Write malloc.c (and optionally the .so) and the build snippets; returns what was written."""
    out = Path(out)
    if out.is_dir():
        raise HctuneError(f"-o {out} is a directory; name the file, e.g. -o {out}/malloc.c")
    setting, prov = choose_setting(db_path, study, objective, preset, sets)
    from hctune import render  # the renderer of the HC allocator (another part of hctune)
    text = render.render_malloc(setting, prov)
    existed = out.exists()
    write_atomic(out, text)
    written = {"malloc_c": str(out), "setting": setting, "provenance": prov}
    so_path = Path(so) if so else None
    if so_path is not None:
        try:
            so_path.parent.mkdir(parents=True, exist_ok=True)
            written["so_command"] = compile_so(out, so_path)
        except BaseException:
            if not existed:        # no compiler, no room: leave nothing of a half-done emit
                out.unlink(missing_ok=True)
            raise
        written["so"] = str(so_path)
    snippet_vars = {"source": out.name, "mk_name": "malloc.mk", "cmake_name": "hcmalloc.cmake",
                    "so_name": so_path.name if so_path else "libhcmalloc.so"}
    snippet_vars["so_stem"] = snippet_vars["so_name"].removeprefix("lib").removesuffix(".so")
    for name, tpl in (("malloc.mk", "snippets/malloc.mk.j2"),
                      ("hcmalloc.cmake", "snippets/hcmalloc.cmake.j2")):
        path = out.parent / name
        write_atomic(path, templating.render(tpl, **snippet_vars))
        written[name] = str(path)
    return written
