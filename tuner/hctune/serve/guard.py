"""What `hctune serve` checks before an endpoint reads a byte of the body (an ASGI middleware):

- a write (POST, PUT, PATCH, DELETE) from another origin is refused (`Origin` or
  `Sec-Fetch-Site` say so), and every write must show it comes from this site: JSON (a browser
  sends it cross-origin only after a preflight this server never answers), the
  `X-Requested-With` header (the same), `Authorization`, or the page's CSRF token (the
  `csrf` query parameter of the service's own forms, equal to the `hctune_csrf` cookie);
- with a token, every request but /login, /logout, the OpenAPI document and the API docs
  needs it (Authorization: Bearer T, or the session cookie /login sets), reads too unless
  `serve --public-read` (downloads still need it then); a page asks the browser to /login.

So an unauthenticated or forged upload is answered before anything is written."""

from __future__ import annotations

import json
from urllib.parse import parse_qs, urlsplit

from starlette.requests import Request

from hctune.serve.state import COOKIE, CSRF_COOKIE, Service

PUBLIC = ("/login", "/logout", "/openapi.json", "/docs", "/docs/oauth2-redirect", "/static/")
SAFE = ("GET", "HEAD", "OPTIONS")
DOWNLOADS = ("/emit/", "/report.html")


def _same_origin(request: Request) -> bool:
    site = request.headers.get("sec-fetch-site")
    if site in ("cross-site", "same-site"):   # same-site: another port or subdomain
        return False
    origin = request.headers.get("origin")
    if origin is None:
        return True
    host = request.headers.get("host", "")
    return origin != "null" and urlsplit(origin).netloc == host


def csrf_ok(request: Request) -> bool:
    """Whether a write shows it comes from this site (see the module's docstring)."""
    h = request.headers
    if h.get("content-type", "").split(";")[0].strip().lower() == "application/json":
        return True
    if "x-requested-with" in h or "authorization" in h:
        return True
    cookie = request.cookies.get(CSRF_COOKIE)
    given = parse_qs(request.url.query).get("csrf", [None])[0]
    return bool(cookie) and given == cookie


def refusal(svc: Service, request: Request) -> tuple[int, str] | None:
    """(status, one line) when the request must not reach its endpoint; None when it may."""
    path = request.url.path
    if request.method not in SAFE:
        if not _same_origin(request):
            return 403, "a write from another origin is refused"
        if not csrf_ok(request):
            return 403, ("a write needs this site's CSRF token (its forms carry it), JSON, or "
                         "the X-Requested-With header")
    if svc.cfg.token is None or svc.authorised(request):
        return None
    if path.startswith(PUBLIC) or path == "/":
        return None
    if request.method in SAFE and svc.cfg.public_read and not any(d in path for d in DOWNLOADS):
        return None
    return (403 if forged(svc, request) else 401), \
        "a valid token is required (Authorization: Bearer TOKEN)"


def forged(svc: Service, request: Request) -> bool:
    """A wrong token, or a session cookie this token did not sign (403); no credentials, or a
    session that ended (logout) or expired, asks for a login again (401)."""
    if "authorization" in request.headers:
        return True
    return COOKIE in request.cookies and svc.signed_sid(request) is None


class Guard:
    def __init__(self, app, svc: Service):
        self.app = app
        self.svc = svc

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        request = Request(scope)
        why = refusal(self.svc, request)
        if why is None:
            return await self.app(scope, receive, send)
        status, msg = why
        path = request.url.path
        wants_page = request.method in SAFE and not path.startswith("/api/") and \
            "text/html" in request.headers.get("accept", "")
        if status == 401 and wants_page:
            headers = [(b"location", b"/login"), (b"content-length", b"0")]
            await send({"type": "http.response.start", "status": 303, "headers": headers})
            await send({"type": "http.response.body", "body": b""})
            return
        body = json.dumps({"error": msg}).encode()
        # the body is not read: the connection closes after the answer
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(body)).encode()),
                                (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": body})
