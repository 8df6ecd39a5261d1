"""The workers of `hctune serve`'s database, as they beat into hc_workers (hctune.jobs,
hctune.jobs.runner.Presence): every `hctune worker`, local (`serve --workers N`) or on
another machine, with its host, pid, start, last beat, state and the study and trial it works
on. A worker that stopped says so; one whose process is gone (this machine) or that has been
silent for longer than the grace period shows as dead, and is forgotten once silent for
HCTUNE_WORKER_PRUNE_SECONDS (an hour by default)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse
from pydantic import BaseModel

from hctune.serve.state import Service, service

router = APIRouter(tags=["workers"])


class Worker(BaseModel):
    id: str
    host: str
    pid: int
    local: bool
    started: str
    beat: str
    seconds_since_beat: int | None
    state: str
    alive: bool
    study: str | None
    trial: int | None
    last_study: str | None


@router.get("/api/workers", response_model=list[Worker])
def api_workers(svc: Service = Depends(service)):
    """Every worker this database has heard from lately, the latest to start first. `state`:
    idle, running, comparing or validating (a live worker), stopped (it said so), dead (its
    process is gone, or it has not beaten for longer than the grace period); `study` and
    `trial`: what a live one works on."""
    return svc.workers()


@router.get("/workers", response_class=HTMLResponse, include_in_schema=False)
def workers_page(request: Request, svc: Service = Depends(service)):
    return svc.page("serve_workers.html.j2", request, forms=False, workers=svc.workers())
