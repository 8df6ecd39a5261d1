"""The downloads of `hctune serve`: a study's tuned malloc.c (its best setting, or one trial's),
its Make and CMake snippets, the shared library, hctune.env when the answer is another
allocator (a study across allocators), and the HTML report. The setting, its
provenance and the files come from hctune.emit, the functions `hctune emit` calls."""

from __future__ import annotations

import secrets
import shutil
from pathlib import Path

from fastapi import APIRouter, Depends, HTTPException, Query
from fastapi.responses import FileResponse, HTMLResponse, Response

from hctune import allocator_knobs as _xknobs
from hctune import allocators
from hctune import emit as _emit
from hctune.serve.auth import need_token
from hctune.serve.state import Service, service
from hctune import report as _report

router = APIRouter(tags=["emit"], dependencies=[Depends(need_token)])

ENV = "hctune.env"   # another allocator's answer: its LD_PRELOAD and variables (emit --env)

_FILES = {"malloc.c": "text/x-c", "malloc.mk": "text/plain",
          "hcmalloc.cmake": "text/plain", _emit.SO_NAME: "application/octet-stream",
          ENV: "text/plain"}


@router.get("/api/studies/{name}/emit/{file}")
def api_emit(name: str, file: str,
             trial: int | None = Query(None, ge=0, le=2**63 - 1,
                                       description="a finished trial's number (default: the "
                                       "study's best, the validation's winner once validated)"),
             svc: Service = Depends(service)):
    """The study's best setting (or `trial`'s) as malloc.c, its Make or CMake snippet, or
    the shared library built on this server's platform."""
    if file not in _FILES:
        raise HTTPException(404, f"no such file {file!r}; one of {', '.join(_FILES)}")
    q = svc.queue_row(name)
    if q["state"] == "queued":   # (and the library's error would list every study's name)
        raise HTTPException(409, f"study {name!r} has not started: no setting yet")
    if file == ENV:
        return _env_file(svc, name, trial)
    alloc, setting, prov = _emit.choose(svc.cfg.db_path, name, None, None, (), trial=trial,
                                        paths=False)
    if not allocators.family(alloc).compiled:
        raise HTTPException(409, f"the answer is {_xknobs.describe(alloc, setting)}: not HC, "
                                 f"so there is no {file}; download {ENV}")
    d = _emit.emit_into(svc.cfg.data_dir / "emit", setting, prov, so=file == _emit.SO_NAME)
    _keep_newest(svc.cfg.data_dir / "emit", KEEP, d)
    return FileResponse(d / file, media_type=_FILES[file], filename=file)


def _env_file(svc: Service, name: str, trial: int | None):
    """The study's answer when it is another allocator than HC (a study across allocators):
    the shell file `hctune emit --env` writes, made with the same functions. HC's answer is
    malloc.c and its library (the file would name this server's path of the .so)."""
    alloc, setting, prov = _emit.choose(svc.cfg.db_path, name, None, None, (), trial=trial,
                                        paths=False, any_allocator=trial is None)
    if allocators.family(alloc).compiled:
        raise HTTPException(409, f"study {name!r}'s answer is HC: download malloc.c (or "
                                 f"{_emit.SO_NAME})")
    d = svc.cfg.data_dir / "emit" / f"env-{secrets.token_hex(8)}"
    d.mkdir(parents=True)
    try:
        _emit.write_env(d / ENV, alloc, setting, prov)
        return Response((d / ENV).read_bytes(), media_type="text/plain",
                        headers={"Content-Disposition": f'attachment; filename="{ENV}"'})
    finally:
        shutil.rmtree(d, ignore_errors=True)


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
    svc.queue_row(name)
    headers = {"Content-Disposition": f'attachment; filename="{name}.html"'} if download else {}
    return HTMLResponse(_report.render(_report.collect(svc.cfg.db_path, name)), headers=headers)
