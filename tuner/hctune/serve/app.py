"""The web app and JSON API of `hctune serve` (FastAPI). It reads the results database and the
Optuna storage, stores uploaded traces under its own directory, and queues studies in hc_queue;
it never runs a search in a request (`hctune worker` does).

The endpoints live in one router per concern: auth (the token, /login), traces, studies, emit
(the downloads, through hctune.emit as `hctune emit`), pages (HTML); what they share is
hctune.serve.state. User mistakes are 4xx with {"error": "..."}; with a token, every write and
download needs it (`Authorization: Bearer T`, or the `hctune_token` cookie the /login form
sets)."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException   # FastAPI's and the router's own 404, 405

from hctune import __version__
from hctune.errors import HctuneError, NotFound
from hctune.serve import auth, emit, pages, studies, table, traces, views
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
        return _error(exc.status_code, str(exc.detail))

    @app.exception_handler(RequestValidationError)
    async def _invalid(request, exc):
        errs = exc.errors()
        first = errs[0] if errs else {}
        where = ".".join(str(x) for x in first.get("loc", ()) if x != "body")
        return _error(422, f"{where}: {first.get('msg', 'invalid request')}")

    @app.exception_handler(Exception)
    async def _internal(request, exc):  # never a traceback to the client
        return _error(500, f"internal error: {type(exc).__name__}")

    for r in (auth.router, traces.router, studies.router, views.router, table.router, emit.router,
              pages.router):
        app.include_router(r)
    app.add_middleware(Guard, svc=app.state.service)
    app.openapi = lambda: _openapi(app)
    return app


def _openapi(app: FastAPI) -> dict:
    """FastAPI's document, with the token's scheme declared (hctune.serve.guard enforces it)."""
    if app.openapi_schema is None:
        spec = get_openapi(title=app.title, version=app.version, description=app.description,
                           routes=app.routes)
        spec.setdefault("components", {})["securitySchemes"] = {
            "bearer": {"type": "http", "scheme": "bearer", "description":
                       "the server's token (HCTUNE_TOKEN); a browser logs in at /login"}}
        spec["security"] = [{"bearer": []}]
        app.openapi_schema = spec
    return app.openapi_schema
