"""The trial table of a study's page, filtered, sorted and paged by the server: one page of at
most MAX_PAGE trials per request whatever the study's size, every parameter checked, with the
Pareto front of (footprint, speed) against glibc marked (hctune.serve.trials makes the pages
from its in-memory read of the study)."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from hctune.serve import studies as _api
from hctune.serve.state import service
from hctune.serve.trials import MAX_OFFSET, MAX_PAGE, SORT_KEYS, STATES

router = APIRouter(tags=["studies"])


@router.get("/api/studies/{name}/table")
async def api_table(
        request: Request, name: str,
        state: Literal[STATES] | None = Query(None, description="only the trials in this state"),
        allocator: str | None = Query(None, max_length=64,
                                      description="only the trials of this allocator "
                                                  "(cross-allocator studies; hc otherwise)"),
        q: str = Query("", max_length=200, description="only the trials whose setting (knob "
                                                        "values) or seed holds this text"),
        front: bool = Query(False, description="only the trials on the Pareto front"),
        sort: Literal[SORT_KEYS] = Query("number", description="the column to sort by"),
        desc: bool = Query(True, description="largest first"),
        offset: int = Query(0, ge=0, le=MAX_OFFSET, description="trials to skip"),
        limit: int = Query(50, ge=1, le=MAX_PAGE, description="trials in the page")):
    """One page of the study's trial table: the trials that pass the filters, sorted, with how
    many match, the Pareto front of (footprint, speed) against glibc (`front`, trial numbers;
    each trial says whether it is on it) and the allocators and states seen. The ETag changes
    with the page: with `If-None-Match` an unchanged page is a 304 with no body."""
    svc = service(request)
    q_row = svc.queue_row(name)
    snap = await _api.snapshot(svc, name, q_row["state"])
    if snap is None:
        body, etag = (b'{"total":0,"matched":0,"offset":0,"limit":%d,"front":[],"allocators":[],'
                      b'"states":[],"trials":[]}' % limit, '"empty"')
    else:
        body, etag = snap.table(state, allocator, q, front, sort, desc, offset, limit)
    headers = {"ETag": etag, "Cache-Control": "no-cache"}
    if _api.not_modified(request, etag):
        return Response(status_code=304, headers=headers)
    return Response(body, media_type="application/json", headers=headers)
