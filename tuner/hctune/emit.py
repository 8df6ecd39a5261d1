"""`hctune emit`: the tuned allocator as one malloc.c (with where its setting came from), and
optionally its shared library, plus Make and CMake snippets to pull it into a build.

Every file is written to a temporary name and renamed, so an interrupted emit leaves either the
old file or the new one, never half of one.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import subprocess
import tempfile
from pathlib import Path

from hctune import VERSION_TEXT
from hctune import allocator_knobs, allocators
from hctune import knobs as _knobs
from hctune import build, render, templating
from hctune import text as _text
from hctune import validate as _validate
from hctune.db import Database
from hctune.errors import HctuneError, NotFound
from hctune.files import write_atomic

SO_NAME = "libhcmalloc.so"


def compile_so(source: Path, out: Path, cc: str | None = None) -> list[str]:
    """Compile `source` into the shared library `out` (atomically) with the HC recipe the
    search's builds use (configs/build.toml), so it holds the code that was measured; returns
    the command."""
    cc = cc or build.compiler()
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".so", dir=out.parent)
    os.close(fd)
    cmd = [*shlex.split(cc), *build.CFLAGS, "-o", tmp, str(source)]
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


def _trace_text(traces, paths: bool) -> str:
    """The study's traces for a provenance; without paths (the service: its own file names are
    none of the reader's business) only their ids and commands."""
    return ", ".join(f"#{t.id}" + (f" {t.path}" if paths else "")
                     + (f" ({_text.command(t.command)})" if t.command else "")
                     for t in traces)


def choose_setting(db_path, study: str | None, objective: str | None, preset: str | None,
                   sets, trial: int | None = None, paths: bool = True) -> tuple[dict, dict]:
    """(setting, provenance) from a study's best trial (the real runs' winner once validated),
    one finished `trial` of it, or a preset, `--set` applied last. Used by `hctune emit` and
    the service alike. A recommendation of another allocator than HC has no malloc.c: one
    line pointing at `emit --env`."""
    alloc, setting, prov = choose(db_path, study, objective, preset, sets, trial=trial,
                                  paths=paths)
    fam = allocators.family(alloc)
    if not fam.compiled:
        raise HctuneError(f"the recommendation is {fam.describe(setting)}: "
                          f"not HC, so there is no malloc.c to write; write its environment "
                          f"with `hctune emit --env FILE`")
    return setting, prov


def choose(db_path, study: str | None, objective: str | None, preset: str | None, sets,
           allocator: str | None = None, trial: int | None = None,
           paths: bool = True, any_allocator: bool = False) -> tuple[str, dict, dict]:
    """(allocator, setting, provenance): a study's answer (the real runs' winner once
    validated, else the replay's best trial; or one finished `trial`), a preset, or
    `allocator` with its library defaults; `--set` applied last (HC's KNOB=VALUE, another
    allocator's ALLOCATOR.KNOB=VALUE). any_allocator (emit --env): the validation's
    recommendation over every candidate, which can be glibc or jemalloc as they come, instead
    of its HC winner."""
    sets = list(sets or ())
    prov = {}
    if not allocators.of(allocator).compiled:    # None: HC, the answer of a study or a preset
        if study is not None or preset is not None:
            raise HctuneError(f"--allocator {allocator} and --study/--preset choose the setting "
                              f"two ways; give one")
        if allocators.find(allocator) is None:
            raise HctuneError(f"--allocator: use hc or {', '.join(allocator_knobs.names())}, "
                              f"not {allocator!r}")
        allocators.resolve(allocator)  # installed? (one line saying how to add it)
        setting = allocators.family(allocator).parse(sets)
        prov.update(objective=f"{allocator} as asked (--allocator"
                              + (f", --set {' '.join(sets)})" if sets else ")"),
                    measured="not measured by hctune", validated="not validated in real runs",
                    date=render.date_text(), hctune=VERSION_TEXT)
        return allocator, setting, prov
    if not any("." in i.partition("=")[0] for i in sets):
        _knobs.parse_sets(sets)   # HC's --set: a bad one fails before the study is read
    if preset is not None:
        if study is not None:
            raise HctuneError("--preset and --study choose the setting two ways; give one")
        setting = _knobs.resolve(preset, sets)
        prov.update(trace="none (a preset, not tuned to a trace)", objective=f"preset {preset}",
                    source=_knobs.preset_source(preset), measured="not measured by hctune",
                    date=render.date_text(), hctune=VERSION_TEXT)
        return "hc", setting, prov
    from hctune.search import answer as _answer  # deferred: Optuna, which only a study-based emit needs
    with Database(db_path) as db:
        try:
            ans = _answer.decide(db, study, objective, trial=trial)
        except HctuneError as e:
            if trial is None and study is None and "no study" in str(e):
                raise HctuneError("no study in the database: run `hctune search` first, "
                                  "or emit a paper setting with --preset generic") from None
            raise
        traces = _answer.study_traces(db, ans.row)
    row, objective, metric, real = ans.row, ans.objective, ans.metric, ans.validation
    got = ans.choice(any_allocator)
    rec = got.entry if real is not None and any_allocator else None
    alloc, chosen_t, origin = got.allocator, got.trial, got.origin
    setting = _answer.complete(alloc, got.setting, sets)
    as_it_comes, seed_t = got.as_it_comes, got.seed_trial
    overrides = bool(sets)
    measured = _measured(chosen_t, metric) if chosen_t is not None \
        else f"{_measured(seed_t, metric)} (its defaults' trial {seed_t.number})" \
        if seed_t is not None else "not measured by the study"
    if overrides:
        measured = f"as searched, before --set {' '.join(sets)}: {measured}"
    prov.update(trace=_trace_text(traces, paths),
                objective=f"{objective} (perf metric: {metric}); study {row['name']}, "
                          + (f"the {origin['objective']} study {origin['study']}'s trial "
                             f"{origin['trial']}, chosen by the real runs" if origin
                             else f"trial {chosen_t.number}" if chosen_t is not None
                             else f"{alloc} as it comes" if as_it_comes
                             else "generic setting"),
                source=(f"seeded from {chosen_t.user_attrs['seed']}"
                        if chosen_t is not None and chosen_t.user_attrs.get("seed")
                        else "found by the Optuna search" if chosen_t is not None
                        else f"{alloc}'s library defaults" if as_it_comes
                        else "Hasan & Chang 2006, Table 6"),
                measured=measured)
    if trial is not None:
        prov["chosen by"] = f"asked for trial {trial}"
    elif rec is not None:
        prov["chosen by"] = (f"real runs: {rec['candidate']} is the recommendation of "
                             f"validation #{real['validation_id']} on {real['measure']} (the "
                             "one rule: significantly better than every simpler option, else "
                             "the simpler one)")
        prov.update(_validate.provenance(real, rec["candidate"]))
    elif real is not None:
        prov["chosen by"] = (f"real runs: {real['winner']['candidate']} won validation "
                             f"#{real['validation_id']} on {real['measure']} (the one rule: "
                             "significantly better than every simpler setting, else the "
                             "simpler one)")
        prov.update(_validate.provenance(real))
        rec = real.get("recommendation")
        if rec and rec["candidate"] != real["winner"]["candidate"]:
            glibc = rec["allocator"] == "glibc" and rec["kind"] != "tuned"
            prov["recommendation"] = (
                ("keep glibc" if glibc else f"use {rec['candidate']}")
                + f": no HC setting was significantly better than "
                f"{'glibc' if glibc else rec['candidate']} in the real runs (this file is the "
                f"best tuned or generic setting, {real['winner']['candidate']}; see the "
                "verdict)")
    else:
        prov["validated"] = "not validated in real runs (hctune validate)"
    if allocators.of(alloc).fits_tables and chosen_t is not None:
        from hctune.search import fitted as _fit   # deferred, as the search's modules are
        if _fit.describe(setting):
            prov["size classes"] = _fit.describe(setting)
    prov.update(date=render.date_text(), hctune=VERSION_TEXT)
    return alloc, setting, prov


def write_snippets(directory: Path, source: str, so_name: str = SO_NAME) -> dict:
    """The Make and CMake snippets that build `source` (a file in `directory`) into `so_name`;
    returns {file name: path}."""
    # the HC recipe's flags (configs/build.toml) but for what the snippet's rules say themselves
    cflags = " ".join(f for f in build.CFLAGS if f not in ("-fPIC", "-shared", "-pthread"))
    snippet_vars = {"source": source, "mk_name": "malloc.mk", "cmake_name": "hcmalloc.cmake",
                    "so_name": so_name, "cflags": cflags,
                    "so_stem": so_name.removeprefix("lib").removesuffix(".so")}
    written = {}
    for name, tpl in (("malloc.mk", "snippets/malloc.mk.j2"),
                      ("hcmalloc.cmake", "snippets/hcmalloc.cmake.j2")):
        path = Path(directory) / name
        write_atomic(path, templating.render(tpl, **snippet_vars))
        written[name] = str(path)
    return written


def emit_into(directory, setting: dict, prov: dict, so: bool = False) -> Path:
    """malloc.c, its snippets and (so) libhcmalloc.so for `setting` in a directory of their own
    under `directory`, named by the source's hash: a second call for the same source writes
    nothing again (the service's downloads). Returns that directory."""
    text = render.render_malloc(setting, prov)
    d = Path(directory) / hashlib.sha256(text.encode()).hexdigest()[:16]
    d.mkdir(parents=True, exist_ok=True)
    src = d / "malloc.c"
    if not src.exists():
        write_atomic(src, text)
    if not (d / "hcmalloc.cmake").exists():
        write_snippets(d, src.name)
    if so and not (d / SO_NAME).exists():
        compile_so(src, d / SO_NAME)
    return d


def emit(db_path, out, study=None, objective=None, preset=None, sets=(), so=None) -> dict:
    """Write malloc.c (and optionally the .so) and the build snippets; returns what was written."""
    out = Path(out)
    if out.is_dir():
        raise HctuneError(f"-o {out} is a directory; name the file, e.g. -o {out}/malloc.c")
    setting, prov = choose_setting(db_path, study, objective, preset, sets)
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
    written.update(write_snippets(out.parent, out.name,
                                  so_path.name if so_path else SO_NAME))
    return written


def _generic_searched() -> dict:
    """HC's generic setting as the search measures it (its fixed knobs held)."""
    from hctune.search import space  # deferred: Optuna, which only a study-based emit needs
    return space.for_search(_knobs.preset("generic"))


def write_env(path, alloc: str, setting: dict, prov: dict, library: Path | None = None) -> dict:
    """Write the shell file that, sourced, runs a program under `alloc` with `setting`
    (LD_PRELOAD of its library and its variables), with the same setting as a one-line
    command, GLIBC_TUNABLES/MALLOC_CONF string, systemd drop-in, Dockerfile ENV block and
    LD_PRELOAD line in comments, and the evidence (`prov`) above. For HC, `library` is the
    .so written beside it."""
    path = Path(path)
    if path.is_dir():
        raise HctuneError(f"--env {path} is a directory; name the file, e.g. {path}/hctune.env")
    f = allocators.family(alloc).env_file(setting, library, _generic_searched)
    library, variables, package, title = f["library"], f["variables"], f["package"], f["title"]
    exports = []
    if library is not None:
        exports.append(("LD_PRELOAD", str(Path(library).resolve())))
    exports += list(variables.items())
    text = templating.render("snippets/allocator.env.j2", title=title, env_name=path.name,
                             prov=[(k, _text.comment(v)) for k, v in prov.items()],
                             package=package,
                             library=str(Path(library).resolve()) if library else None,
                             exports=[(k, shlex.quote(v), v) for k, v in exports])
    write_atomic(path, text)
    return {"env": str(path), "allocator": alloc, "variables": dict(exports)}


def emit_env(db_path, env_path, study=None, objective=None, preset=None, sets=(),
             allocator=None, out=None, so=None) -> dict:
    """`hctune emit --env FILE`: the recommendation as a shell file (write_env); for HC the
    malloc.c (`out`, default malloc.c beside FILE) and its .so (`so`, default libhcmalloc.so
    beside FILE) are written too, and LD_PRELOAD names that .so."""
    env_path = Path(env_path)
    alloc, setting, prov = choose(db_path, study, objective, preset, sets, allocator,
                                  any_allocator=True)
    written = {}
    library = None
    if allocators.family(alloc).compiled:
        out = Path(out) if out else env_path.parent / "malloc.c"
        so = Path(so) if so else env_path.parent / SO_NAME
        written = emit(db_path, out, study, objective, preset, sets, so)
        library = so
    written.update(write_env(env_path, alloc, setting, prov, library))
    written["setting"] = setting
    written["provenance"] = prov
    return written
