"""The web app and JSON API of `hctune serve` (FastAPI). It reads the results database and the
Optuna storage, stores uploaded traces under its own directory, and queues studies in hc_queue;
it never runs a search in a request (`hctune worker` does).

The endpoints live in one router per concern: auth (the token, /login), traces, studies, emit
(the downloads, through hctune.emit as `hctune emit`), pages (HTML); what they share is
hctune.serve.state. User mistakes are 4xx with {"error": "..."}; with a token, every write and
download needs it (`Authorization: Bearer T`, or the `hctune_token` cookie the /login form
sets)."""

from __future__ import annotations

import os

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException   # FastAPI's and the router's own 404, 405
from starlette.requests import ClientDisconnect

from hctune import __version__
from hctune.errors import HctuneError, NotFound
from hctune.serve import auth, emit, pages, studies, table, traces, views, workers
from hctune.serve.guard import Guard
from hctune.serve.state import DEFAULT_MAX_UPLOAD, ENV_CONFIG, Config, Service
from hctune.serve.studies import StudyRequest
from hctune.serve.traces import FORMATS

__all__ = ["Config", "ENV_CONFIG", "DEFAULT_MAX_UPLOAD", "FORMATS", "StudyRequest",
           "app_from_env", "create_app"]


def app_from_env() -> FastAPI:
    """The app of one of `serve --http-workers N`'s processes."""
    return create_app(Config.from_env())


def _error(status: int, msg: str) -> JSONResponse:
    return JSONResponse({"error": msg}, status_code=status)


def create_app(cfg: Config) -> FastAPI:
    # /docs is hctune's own page (hctune.serve.pages), not Swagger UI, which a browser would
    # load from a CDN (blank offline)
    app = FastAPI(title="hctune", version=__version__, docs_url=None, redoc_url=None,
                  description="Profile traces, tune the HC allocator, download a tuned malloc.c")
    app.state.cfg = cfg
    app.state.service = Service(cfg)

    @app.exception_handler(HctuneError)
    async def _hctune_error(request, exc):
        return _error(404 if isinstance(exc, NotFound) else 400, str(exc))

    @app.exception_handler(HTTPException)
    async def _http_error(request, exc):
        r = _error(exc.status_code, str(exc.detail))
        r.headers.update(getattr(exc, "headers", None) or {})   # Retry-After, Allow
        return r

    @app.exception_handler(RequestValidationError)
    async def _invalid(request, exc):
        errs = exc.errors()
        first = errs[0] if errs else {}
        where = ".".join(str(x) for x in first.get("loc", ()) if x != "body")
        return _error(422, f"{where}: {first.get('msg', 'invalid request')}")

    @app.exception_handler(ClientDisconnect)
    async def _gone(request, exc):  # an upload stopped (hctune.serve.guard: too slow)
        return _error(408, "the client stopped sending the body")

    @app.exception_handler(Exception)
    async def _internal(request, exc):  # never a traceback to the client
        return _error(500, f"internal error: {type(exc).__name__}")

    @app.get("/api/server", tags=["server"])
    def api_server():
        """This server process: its version, pid, and what it made since it started (reports
        built for finished studies, views drawn, shared libraries compiled), counted."""
        svc = app.state.service
        return {"version": __version__, "pid": os.getpid(),
                "counters": {**svc.counters, "compile": svc.compiles.started}}

    for r in (auth.router, traces.router, studies.router, workers.router, views.router,
              table.router, emit.router, pages.router):
        app.include_router(r)
    app.add_middleware(Guard, svc=app.state.service)
    app.openapi = lambda: _openapi(app)
    return app


ERROR_SCHEMA = {"type": "object", "required": ["error"], "additionalProperties": False,
                "title": "Error", "properties": {"error": {
                    "type": "string", "title": "Error",
                    "description": "one line saying what was wrong"}}}

# the answers every API endpoint may give, besides its own (hctune.serve.guard: the token and
# CSRF checks; the exception handlers above)
_COMMON_ERRORS = {"400": "a user mistake (one line)",
                  "401": "no token, or a session that ended (log in again)",
                  "403": "a wrong token, a forged session, or a write from another origin "
                         "or without this site's CSRF token",
                  "408": "the body did not arrive in time",
                  "413": "the body is larger than the server takes",
                  "421": "a Host name this server does not serve (DNS rebinding)",
                  "422": "a parameter or body field is invalid (which, and why)",
                  "500": "an internal error (its type only)"}


def _openapi(app: FastAPI) -> dict:
    """FastAPI's document, with the token's scheme declared (hctune.serve.guard enforces it)
    and every error response described as the server sends it: {"error": "one line"} (not
    FastAPI's {"detail": [...]}, which the handlers above never send)."""
    if app.openapi_schema is None:
        spec = get_openapi(title=app.title, version=app.version, description=app.description,
                           routes=app.routes)
        components = spec.setdefault("components", {})
        components["securitySchemes"] = {
            "bearer": {"type": "http", "scheme": "bearer", "description":
                       "the server's token (HCTUNE_TOKEN); a browser logs in at /login"}}
        spec["security"] = [{"bearer": []}]
        schemas = components.setdefault("schemas", {})
        for fastapi_own in ("HTTPValidationError", "ValidationError"):
            schemas.pop(fastapi_own, None)
        schemas["Error"] = ERROR_SCHEMA
        error = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
        for path, ops in spec.get("paths", {}).items():
            for op in ops.values():
                if not isinstance(op, dict) or "responses" not in op:
                    continue
                responses = op["responses"]
                for code, text in _COMMON_ERRORS.items():
                    responses.setdefault(code, {"description": text})
                if "{" in path:
                    responses.setdefault("404", {"description": "no such study, trace or file"})
                for code, r in responses.items():
                    if code[:1] in "45":
                        r["content"] = error
        app.openapi_schema = spec
    return app.openapi_schema
