"""The traces of `hctune serve`: upload (a trace in hctune's format, or one to import), list,
one trace with its statistics. An upload is stored under the server's own directory by its
sha256, never under the client's file name, and registered as the CLI registers one
(hctune.trace.register)."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import shutil
import tempfile
from pathlib import Path

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi import Path as PathParam
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from python_multipart.multipart import MultipartParser, parse_options_header
from python_multipart.exceptions import MultipartParseError

from hctune.errors import HctuneError
from hctune.serve.auth import need_token
from hctune.serve.state import Service, service, trace_json
from hctune.trace.importers import import_trace
from hctune.trace.stats import stats as trace_stats
from hctune.trace.register import register

FORMATS = ("hctune", "text", "mtrace")

router = APIRouter(tags=["traces"])


def _too_large(limit: int) -> HTTPException:
    return HTTPException(413, f"upload larger than the limit ({limit} bytes)")


async def receive_upload(svc: Service, request: Request,
                         tmpdir: Path) -> tuple[Path, str, str]:
    """Stream a multipart/form-data upload (fields `file` and `format`) into tmpdir/upload,
    under the server's own directory, stopping at the limit: a Content-Length over it is
    refused before a byte is read, a chunked body once it passes it. (The token was checked
    before the body was read: hctune.serve.guard.) Returns (the file, its format, the sha256 of
its bytes)."""
    limit = svc.cfg.max_upload
    length = request.headers.get("content-length")
    if length and length.isdigit() and int(length) > limit + _FORM_SLACK:
        raise _too_large(limit)
    # room on the disk for what comes (its Content-Length, else the largest upload) before
    # a byte is written
    free_space(svc, int(length) if length and length.isdigit() else limit)
    ctype, params = parse_options_header(request.headers.get("content-type", ""))
    if ctype != b"multipart/form-data" or not params.get(b"boundary"):
        raise HTTPException(415, "upload a trace as multipart/form-data (fields file, format)")
    raw = tmpdir / "upload"   # the client's file name is never used
    need_csrf = request.scope.get("hctune.csrf")
    part = {"headers": b"", "name": None, "field": b"", "value": b""}
    fields: dict[str, bytes] = {}
    got = {"file": False, "size": 0, "sha256": hashlib.sha256()}
    out = open(raw, "wb")

    def header_field(data, start, end):
        part["field"] += data[start:end]

    def header_value(data, start, end):
        part["value"] += data[start:end]

    def header_end():
        if part["field"].lower() == b"content-disposition":
            _, p = parse_options_header(part["value"])
            part["name"] = p.get(b"name", b"").decode("utf-8", "replace")
            if part["name"] == "file":
                got["file"] = True
                # a form's upload (hctune.serve.guard): its csrf field comes before its file,
                # and not a byte of the file is written unless it is right
                if need_csrf is not None and not (need_csrf and hmac.compare_digest(
                        fields.get("csrf", b""), need_csrf.encode())):
                    raise HTTPException(403, "a write needs this site's CSRF token (its forms "
                                             "carry it), JSON, or the X-Requested-With header")
        part["field"], part["value"] = b"", b""

    def part_begin():
        part["name"] = None

    def part_data(data, start, end):
        if part["name"] == "file":
            got["size"] += end - start
            if got["size"] > limit:
                raise _too_large(limit)
            out.write(data[start:end])
            got["sha256"].update(data[start:end])
        elif part["name"] is not None:
            v = fields.get(part["name"], b"") + data[start:end]
            if len(v) > 256:
                raise HTTPException(400, f"field {part['name'][:32]!r} is too long")
            fields[part["name"]] = v

    parser = MultipartParser(params[b"boundary"], {
        "on_part_begin": part_begin, "on_part_data": part_data,
        "on_header_field": header_field, "on_header_value": header_value,
        "on_header_end": header_end})
    total = 0
    try:
        async for chunk in request.stream():
            total += len(chunk)
            if total > limit + _FORM_SLACK:
                raise _too_large(limit)
            parser.write(chunk)
        parser.finalize()
    except MultipartParseError:
        raise HTTPException(400, "the upload is not well-formed multipart/form-data") from None
    finally:
        out.close()
    if not got["file"]:
        raise HTTPException(422, "file: a trace file is required")
    fmt = fields.get("format", b"hctune").decode("utf-8", "replace")
    return raw, fmt, got["sha256"].hexdigest()


_FORM_SLACK = 65536   # the form's own bytes beside the file (boundaries, headers, format)


def free_space(svc: Service, size: int) -> None:
    """507 unless `size` more bytes leave `serve --min-free` free on the data directory's
    disk."""
    free = shutil.disk_usage(svc.cfg.data_dir).free
    if free - size < svc.cfg.min_free:
        raise HTTPException(507, f"the server's disk has {free >> 20} MiB free; it keeps "
                                 f"{svc.cfg.min_free >> 20} MiB free (serve --min-free)")


def stored(svc: Service) -> tuple[int, int]:
    """(traces, bytes) this server holds in its data directory (its uploads)."""
    sizes = [p.stat().st_size for p in (svc.cfg.data_dir / "traces").glob("*.trace")]
    return len(sizes), sum(sizes)


def quota(svc: Service, size: int) -> None:
    """507 when one more trace of `size` bytes passes the server's quota (serve --max-traces,
    --upload-quota) or the disk's free space."""
    count, used = stored(svc)
    cfg = svc.cfg
    if count + 1 > cfg.max_traces:
        raise HTTPException(507, f"the server holds {count} traces, its most (serve "
                                 "--max-traces); delete some first")
    if used + size > cfg.upload_quota:
        raise HTTPException(507, f"the server's traces take {used >> 20} MiB of its "
                                 f"{cfg.upload_quota >> 20} MiB (serve --upload-quota); this "
                                 f"one would add {max(1, size >> 20)} MiB")
    free_space(svc, size)


def _seen(svc: Service, fmt: str, raw_sha: str) -> Path:
    """Where the trace an upload of these bytes in this format became is noted (its sha256):
    the same upload again is the stored trace (200), whatever the format, without importing
    it again."""
    return svc.cfg.data_dir / "uploads" / f"{fmt}-{raw_sha}"


def _stored_trace(svc: Service, sha: str):
    with svc.db() as db:
        return next((r for r in db.traces() if r["sha256"] == sha), None)


def store_upload(svc: Service, raw: Path, fmt: str, raw_sha: str) -> tuple[dict, bool]:
    """The trace uploaded to `raw` (checked, imported when another format, stored by its
    sha256, registered as the CLI registers one); (its JSON, whether it is new). The same
    bytes uploaded again in the same format are the trace stored then (not new); a new one
    must fit the server's quota."""
    cfg = svc.cfg
    tmpdir = raw.parent
    if fmt not in FORMATS:
        raise HTTPException(400, f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
    if raw.stat().st_size == 0:
        raise HTTPException(400, "the upload is empty")
    seen = _seen(svc, fmt, raw_sha)
    if seen.exists():
        row = _stored_trace(svc, seen.read_text().strip())
        if row is not None:
            return trace_json(row), False
    try:
        if fmt == "hctune":
            trace = raw
        else:
            quota(svc, raw.stat().st_size)   # (an import's output is about its input's size)
            trace = import_trace(raw, fmt, tmpdir / "imported.trace")
        st = trace_stats(trace)   # reads every event: magic, version, well-formed
    except HctuneError as e:   # the server's paths are none of the client's business
        msg = str(e).replace(str(tmpdir / "imported.trace"), "the imported trace")
        raise HTTPException(400, msg.replace(str(raw), "the upload")
                            .replace(str(tmpdir), "")) from None
    if not st.get("events"):
        raise HTTPException(400, "the trace has no allocation events")
    digest = hashlib.sha256(trace.read_bytes()).hexdigest()
    row = _stored_trace(svc, digest)
    new = row is None
    if new:
        quota(svc, trace.stat().st_size)
        final = cfg.data_dir / "traces" / f"{digest}.trace"
        os.replace(trace, final)
        tid, _ = register(cfg.db_path, final, "upload" if fmt == "hctune" else f"import:{fmt}",
                          st)
        with svc.db() as db:
            row = db.trace(tid)
    seen.parent.mkdir(exist_ok=True)
    (seen.parent / f".{seen.name}.tmp").write_text(digest)
    os.replace(seen.parent / f".{seen.name}.tmp", seen)
    return trace_json(row), new


async def upload(svc: Service, request: Request) -> tuple[dict, bool]:
    """receive_upload then store_upload (in a thread: it reads the whole trace), leaving
    nothing behind in the server's temporary directory."""
    # named by this process: one killed mid-upload leaves it to the next start's sweep
    tmpdir = Path(tempfile.mkdtemp(prefix=f"{os.getpid()}-", dir=svc.cfg.data_dir / "tmp"))
    try:
        raw, fmt, raw_sha = await receive_upload(svc, request, tmpdir)
        return await run_in_threadpool(store_upload, svc, raw, fmt, raw_sha)
    finally:
        for p in tmpdir.iterdir():
            p.unlink()
        tmpdir.rmdir()


_UPLOAD_BODY = {"requestBody": {"required": True, "content": {"multipart/form-data": {"schema": {
    "type": "object", "required": ["file"], "properties": {
        "file": {"type": "string", "format": "binary"},
        "format": {"type": "string", "enum": list(FORMATS), "default": "hctune"}}}}}}}


@router.get("/api/traces")
def api_traces(svc: Service = Depends(service)):
    return svc.list_traces()


@router.post("/api/traces", status_code=201, dependencies=[Depends(need_token)],
             openapi_extra=_UPLOAD_BODY, responses={
                 200: {"description": "already stored"},
                 507: {"description": "the server's quota or disk is full"}})
async def api_upload(request: Request):
    """Upload a trace (multipart/form-data: `file`, and `format` hctune, text or mtrace):
    201 with the new trace, 200 with the one already stored with the same content (the same
    bytes in any format, or what imports to a stored trace); 507 past the server's quota
    (serve --max-traces, --upload-quota) or its disk's free space (--min-free)."""
    t, new = await upload(service(request), request)
    return JSONResponse(t, status_code=201 if new else 200)


@router.get("/api/traces/{trace_id}")
def api_trace(trace_id: int = PathParam(ge=1, le=2**63 - 1), svc: Service = Depends(service)):
    with svc.db() as db:
        row = db.trace(trace_id)
    if row is None:
        raise HTTPException(404, f"no trace #{trace_id}")
    out = trace_json(row)
    out["stats"] = json.loads(row["stats_json"]) if row["stats_json"] else None
    return out


@router.delete("/api/traces/{trace_id}", dependencies=[Depends(need_token)])
def api_delete_trace(trace_id: int = PathParam(ge=1, le=2**63 - 1),
                     svc: Service = Depends(service)):
    """Delete a trace no study uses: its row, the allocators' measurements on it, its stored
    contents, and its file when the server holds it. A study that uses it: 409 (delete the
    study first)."""
    with svc.db() as db:
        done = db.delete_trace(trace_id)
    if done is None:
        raise HTTPException(404, f"no trace #{trace_id}")
    if "users" in done:
        raise HTTPException(409, f"trace #{trace_id} is used by {', '.join(done['users'])}: "
                                 "delete those studies first")
    row, same, deleted = done["row"], done["shared"], done["deleted"]
    path = Path(row["path"])
    ours = path.parent == svc.cfg.data_dir / "traces"
    if ours and not same:
        path.unlink(missing_ok=True)
    deleted["file"] = bool(ours and not same)
    return {"id": trace_id, "deleted": deleted}
