"""The downloads of `hctune serve`: a study's tuned malloc.c (its best setting, or one trial's),
its Make and CMake snippets, the shared library, hctune.env when the answer is another
allocator (a study across allocators), and the HTML report. The setting, its
provenance and the files come from hctune.emit, the functions `hctune emit` calls."""

from __future__ import annotations

import asyncio
import os
import shlex
import shutil
import tempfile
from pathlib import Path

from fastapi.concurrency import run_in_threadpool

from fastapi import APIRouter, Depends, HTTPException, Query
from fastapi.responses import FileResponse, HTMLResponse, Response

from hctune import allocator_knobs as _xknobs
from hctune import allocators
from hctune import emit as _emit
from hctune.serve.auth import need_token
from hctune.serve.compiles import RETRY_SECONDS, Busy
from hctune.serve.state import Service, service
from hctune.serve.studies import ENV_FORMS, final_key
from hctune import report as _report

router = APIRouter(tags=["emit"], dependencies=[Depends(need_token)])

ENV = "hctune.env"   # another allocator's answer: its LD_PRELOAD and variables (emit --env)

_FILES = {"malloc.c": "text/x-c", "malloc.mk": "text/plain",
          "hcmalloc.cmake": "text/plain", _emit.SO_NAME: "application/octet-stream",
          ENV: "text/plain", **{f: "text/plain" for f in ENV_FORMS}}


@router.get("/api/studies/{name}/emit/{file}",
            responses={429: {"description": "every compile slot is busy (Retry-After)"}})
async def api_emit(name: str, file: str,
                   trial: int | None = Query(None, ge=0, le=2**63 - 1,
                                             description="a finished trial's number (default: "
                                             "the study's best, the validation's winner once "
                                             "validated)"),
                   svc: Service = Depends(service)):
    """The study's best setting (or `trial`'s) as malloc.c, its Make or CMake snippet, or
    the shared library built on this server's platform (compiled in one bounded pool through
    the build cache: 429 with Retry-After while it is full)."""
    if file not in _FILES:
        raise HTTPException(404, f"no such file {file!r}; one of {', '.join(_FILES)}")
    q = await run_in_threadpool(svc.queue_row, name)
    if q["state"] == "queued":   # (and the library's error would list every study's name)
        raise HTTPException(409, f"study {name!r} has not started: no setting yet")
    if file == ENV or file in ENV_FORMS:
        return await run_in_threadpool(_env_file, svc, name, trial, file)
    alloc, setting, prov = await run_in_threadpool(
        _emit.choose, svc.cfg.db_path, name, None, None, (), trial=trial, paths=False)
    if not allocators.family(alloc).compiled:
        raise HTTPException(409, f"the answer is {_xknobs.describe(alloc, setting)}: not HC, "
                                 f"so there is no {file}; download {ENV}")
    root = svc.cfg.data_dir / "emit"
    d = await run_in_threadpool(_emit.emit_into, root, setting, prov)
    if file == _emit.SO_NAME and not (d / file).exists():
        try:
            fut = svc.compiles.library(setting)
        except Busy as e:
            raise HTTPException(429, str(e), headers={"Retry-After": str(RETRY_SECONDS)}) \
                from None
        lib = await asyncio.wrap_future(fut)
        await run_in_threadpool(_place, lib, d / file)
    await run_in_threadpool(_keep_newest, root, KEEP, d)
    return FileResponse(d / file, media_type=_FILES[file], filename=file)


def _place(lib: Path, out: Path) -> None:
    """The build cache's library as `out` (a link when they share a file system), whole or
    not at all."""
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    try:
        os.link(lib, tmp)
    except OSError:
        shutil.copyfile(lib, tmp)
    os.chmod(tmp, 0o755)
    os.replace(tmp, out)


INSTALLED_SO = Path("/usr/local/lib") / _emit.SO_NAME   # where an HC answer's file says to put it


def _env_file(svc: Service, name: str, trial: int | None, form: str = ENV):
    """The study's answer, whatever the allocator, as the shell file `hctune emit --env`
    writes (made by the same function: its LD_PRELOAD and variables, and the same setting as
    one shell line, a GLIBC_TUNABLES or MALLOC_CONF string, a systemd drop-in, a Dockerfile's
    ENV lines). For HC, LD_PRELOAD names libhcmalloc.so installed in /usr/local/lib (this
    study's libhcmalloc.so download), not a path of this server."""
    alloc, setting, prov = _emit.choose(svc.cfg.db_path, name, None, None, (), trial=trial,
                                        paths=False, any_allocator=trial is None)
    library = None
    if allocators.family(alloc).compiled:
        library = INSTALLED_SO
        prov = {**prov, "library": f"download {_emit.SO_NAME} from this study "
                f"(/api/studies/{name}/emit/{_emit.SO_NAME}) and install it as {library}"}
    d = Path(tempfile.mkdtemp(prefix=f"{os.getpid()}-env-", dir=svc.cfg.data_dir / "tmp"))
    try:
        written = _emit.write_env(d / ENV, alloc, setting, prov, library)
        body = (d / ENV).read_bytes() if form == ENV else \
            env_form(form, written["variables"], alloc).encode()
        return Response(body, media_type="text/plain",
                        headers={"Content-Disposition": f'attachment; filename="{form}"',
                                 "X-Hctune-Allocator": alloc})
    finally:
        shutil.rmtree(d, ignore_errors=True)


def env_form(form: str, variables: dict, alloc: str) -> str:
    """The answer's variables (hctune.env's exports) as a systemd drop-in
    (/etc/systemd/system/APP.service.d/allocator.conf), a Dockerfile's ENV lines, or one shell
    line."""
    head = f"# {alloc}, recommended by hctune (the variables of hctune.env)\n"
    if form == "allocator.conf":
        return head + "[Service]\n" + "".join(
            f'Environment="{k}={v}"\n' for k, v in variables.items())
    if form == "Dockerfile.env":
        return head + "".join(f"ENV {k}={shlex.quote(v)}\n" for k, v in variables.items())
    return " ".join(f"{k}={shlex.quote(v)}" for k, v in variables.items()) + "\n"


KEEP = 64    # emitted directories kept (a .so each, maybe): the rest are made again if asked


def _keep_newest(root: Path, keep: int, current: Path) -> None:
    """Remove all but the `keep` newest emitted directories (never `current`)."""
    dirs = sorted((p for p in root.iterdir() if p.is_dir() and p != current),
                  key=lambda p: p.stat().st_mtime, reverse=True)
    for old in dirs[keep - 1:]:
        shutil.rmtree(old, ignore_errors=True)


@router.get("/api/studies/{name}/report.html")
def api_report(name: str, download: bool = Query(False, description="as an attachment to save "
                                                  "(default: shown in the browser)"),
               svc: Service = Depends(service)):
    """The study's HTML report (hctune report): the trials, the other allocators, the real
    runs."""
    q = svc.queue_row(name)
    headers = {"Content-Disposition": f'attachment; filename="{name}.html"'} if download else {}
    key = final_key(q, svc.trials.get(name, q["state"]))

    def make():
        return _report.render(_report.collect(svc.cfg.db_path, name))
    if key is not None:   # a finished study's report: made once, unless a validation comes
        with svc.db() as db:
            v = db.latest_validation(name, done=False)
        key = (*key, None if v is None else (v["id"], v["status"], v["finished"]))
    return HTMLResponse(make() if key is None else svc.once("report.html", key, make),
                        headers=headers)
