"""The traces of `hctune serve`: upload (a trace in hctune's format, or one to import), list,
one trace with its statistics. An upload is stored under the server's own directory by its
sha256, never under the client's file name, and registered as the CLI registers one
(hctune.trace.register)."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

from fastapi import APIRouter, Depends, File, Form, HTTPException, Request, UploadFile

from hctune.errors import HctuneError
from hctune.serve.auth import need_token
from hctune.serve.state import Service, service, trace_json
from hctune.trace.importers import import_trace
from hctune.trace.stats import stats as trace_stats
from hctune.trace.register import register

FORMATS = ("hctune", "text", "mtrace")

router = APIRouter(tags=["traces"])


def store_upload(svc: Service, up: UploadFile, fmt: str, request: Request) -> dict:
    cfg = svc.cfg
    if fmt not in FORMATS:
        raise HTTPException(400, f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
    length = request.headers.get("content-length")
    if length and length.isdigit() and int(length) > cfg.max_upload + 65536:
        raise HTTPException(413, f"upload larger than the limit ({cfg.max_upload} bytes)")
    tmpdir = Path(tempfile.mkdtemp(dir=cfg.data_dir / "tmp"))
    try:
        raw = tmpdir / "upload"   # the client's file name is never used
        n = 0
        with open(raw, "wb") as f:
            while chunk := up.file.read(1 << 20):
                n += len(chunk)
                if n > cfg.max_upload:
                    raise HTTPException(413, f"upload larger than the limit "
                                             f"({cfg.max_upload} bytes)")
                f.write(chunk)
        if n == 0:
            raise HTTPException(400, "the upload is empty")
        try:
            if fmt == "hctune":
                trace = raw
            else:
                trace = import_trace(raw, fmt, tmpdir / "imported.trace")
            st = trace_stats(trace)   # reads every event: magic, version, well-formed
        except HctuneError as e:   # the server's paths are none of the client's business
            msg = str(e).replace(str(tmpdir / "imported.trace"), "the imported trace")
            raise HTTPException(400, msg.replace(str(raw), "the upload")
                                .replace(str(tmpdir), "")) from None
        if not st.get("events"):
            raise HTTPException(400, "the trace has no allocation events")
        digest = hashlib.sha256(trace.read_bytes()).hexdigest()
        final = cfg.data_dir / "traces" / f"{digest}.trace"
        os.replace(trace, final)
        tid, _ = register(cfg.db_path, final, "upload" if fmt == "hctune" else f"import:{fmt}",
                          st)
    finally:
        for p in tmpdir.iterdir():
            p.unlink()
        tmpdir.rmdir()
    with svc.db() as db:
        return trace_json(db.trace(tid))


@router.get("/api/traces")
def api_traces(svc: Service = Depends(service)):
    return svc.list_traces()


@router.post("/api/traces", status_code=201, dependencies=[Depends(need_token)])
def api_upload(request: Request, file: UploadFile = File(...), format: str = Form("hctune"),
               svc: Service = Depends(service)):
    return store_upload(svc, file, format, request)


@router.get("/api/traces/{trace_id}")
def api_trace(trace_id: int, svc: Service = Depends(service)):
    with svc.db() as db:
        row = db.trace(trace_id)
    if row is None:
        raise HTTPException(404, f"no trace #{trace_id}")
    out = trace_json(row)
    out["stats"] = json.loads(row["stats_json"]) if row["stats_json"] else None
    return out
