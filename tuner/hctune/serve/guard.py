"""What `hctune serve` checks before an endpoint reads a byte of the body (an ASGI middleware):

- a request naming a Host the server does not serve is refused first (421: DNS rebinding,
  hctune.serve.hosts);
- a write (POST, PUT, PATCH, DELETE) from another origin is refused (`Origin` or
  `Sec-Fetch-Site` say so), and every write must show it comes from this site: JSON (a browser
  sends it cross-origin only after a preflight this server never answers), the
  `X-Requested-With` header (the same), `Authorization`, or the page's CSRF token (the
  `csrf` field of the service's own forms, equal to the `hctune_csrf` cookie; never in the
  address);
- a client address that sent too many wrong tokens (HCTUNE_LOGIN_ATTEMPTS, 10 a minute) is
  answered 429 with Retry-After on its next tries, the right token included;
- every answer carries the security headers (CSP with frame-ancestors, nosniff, no referrer);
  HEAD is answered as GET without the body;
- with a token, every request but /login, /logout, the OpenAPI document and the API docs
  needs it (Authorization: Bearer T, or the session cookie /login sets), reads too unless
  `serve --public-read` (downloads still need it then); a page asks the browser to /login.

So an unauthenticated or forged upload is answered before anything is written. Then the body:
a write that is not an upload is read here whole, at most MAX_BODY bytes within BODY_SECONDS
(413, 408: a huge or a trickled JSON body ties up neither memory nor a worker thread); an
upload streams on to its endpoint (its own limit, `serve --max-upload`), and a client that
stops sending for IDLE_SECONDS is taken as gone."""

from __future__ import annotations

import asyncio
import hmac
import json
import os
from urllib.parse import parse_qs, urlsplit

from starlette.requests import Request

from hctune.serve.state import COOKIE, CSRF_COOKIE, Service

# on every answer: no framing (clickjacking), nothing but this site's own scripts, styles and
# images (the pages are self-contained: their scripts and styles are inline), no sniffing of
# a download's type, no address of a page sent to another site
SECURITY_HEADERS = [
    (b"content-security-policy",
     b"default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
     b"img-src 'self' data:; object-src 'none'; base-uri 'none'; form-action 'self'; "
     b"frame-ancestors 'none'"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),   # (no-referrer: a form's Origin would be null)
    (b"x-frame-options", b"DENY"),
]

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
    """Whether a write shows by its headers that it comes from this site (JSON, a header a
    form cannot set, the token); a form of the service's own shows it by its `csrf` field
    instead (form_csrf_ok, or hctune.serve.traces for an upload): never in the address, which
    logs and Referer headers keep."""
    h = request.headers
    if h.get("content-type", "").split(";")[0].strip().lower() == "application/json":
        return True
    return "x-requested-with" in h or "authorization" in h


def form_csrf_ok(request: Request, body: bytes) -> bool:
    """A urlencoded form's `csrf` field equals the browser's hctune_csrf cookie."""
    cookie = request.cookies.get(CSRF_COOKIE)
    try:
        given = parse_qs(body.decode("ascii")).get("csrf", [None])[0]
    except UnicodeDecodeError:
        return False
    return bool(cookie) and given is not None and hmac.compare_digest(given, cookie)


def _form(request: Request) -> str:
    return request.headers.get("content-type", "").split(";")[0].strip().lower()


CSRF_REFUSED = ("a write needs this site's CSRF token (its forms carry it), JSON, or the "
                "X-Requested-With header")


def refusal(svc: Service, request: Request) -> tuple[int, str] | None:
    """(status, one line) when the request must not reach its endpoint; None when it may."""
    path = request.url.path
    if request.method not in SAFE:
        if not _same_origin(request):
            return 403, "a write from another origin is refused"
        if not csrf_ok(request) and not (
                _form(request) == "application/x-www-form-urlencoded" or
                (_form(request) == "multipart/form-data" and path in UPLOADS)):
            return 403, CSRF_REFUSED   # (a form's field is checked once its body is read)
    if svc.cfg.token is None:
        return None
    wait = svc.failures.wait(_client(request))
    if wait and ("authorization" in request.headers or path == "/login" and
                 request.method == "POST"):
        return 429, f"too many wrong tokens from this address; try again in {wait} s"
    if svc.authorised(request):
        return None
    if path.startswith(PUBLIC) or path == "/":
        return None
    if request.method in SAFE and svc.cfg.public_read and not any(d in path for d in DOWNLOADS):
        return None
    if forged(svc, request):
        if "authorization" in request.headers:
            svc.failures.add(_client(request))
        return 403, "a valid token is required (Authorization: Bearer TOKEN)"
    return 401, "a valid token is required (Authorization: Bearer TOKEN)"


def _client(request: Request) -> str:
    return request.client.host if request.client else ""


def forged(svc: Service, request: Request) -> bool:
    """A wrong token, or a session cookie this token did not sign (403); no credentials, or a
    session that ended (logout) or expired, asks for a login again (401)."""
    if "authorization" in request.headers:
        return True
    return COOKIE in request.cookies and svc.signed_sid(request) is None


def _seconds(name: str, default: float) -> float:
    try:
        return max(0.1, float(os.environ.get(name, default)))
    except ValueError:
        return default


MAX_BODY = 1 << 20       # the largest body of a write that is not an upload (JSON, a form)
# such a body must have arrived within this (a slow client: 408); HCTUNE_BODY_SECONDS
BODY_SECONDS = _seconds("HCTUNE_BODY_SECONDS", 30.0)
# an upload may pause at most this long between two pieces; HCTUNE_UPLOAD_IDLE_SECONDS
IDLE_SECONDS = _seconds("HCTUNE_UPLOAD_IDLE_SECONDS", 60.0)
UPLOADS = ("/api/traces", "/traces")   # POST: streamed to disk (hctune.serve.traces)


async def _answer(send, status: int, msg: str, retry_after: int | None = None):
    """The one error shape, and the connection closed: the rest of the body is not read."""
    body = json.dumps({"error": msg}).encode()
    headers = [(b"content-type", b"application/json"),
               (b"content-length", str(len(body)).encode()), (b"connection", b"close")]
    if retry_after:
        headers.append((b"retry-after", str(retry_after).encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _read_body(scope, receive, send, limit: int, seconds: float):
    """The whole body of a small write, read here before the endpoint runs: at most `limit`
    bytes (413 past it, said by Content-Length or counted), within `seconds` (408); None when
    answered (or the client went)."""
    headers = dict(scope.get("headers") or ())
    length = headers.get(b"content-length", b"")
    if length.isdigit() and int(length) > limit:
        await _answer(send, 413, f"the body is larger than {limit >> 10} KiB")
        return None
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    body = bytearray()
    while True:
        try:
            msg = await asyncio.wait_for(receive(), max(0.0, deadline - loop.time()))
        except asyncio.TimeoutError:
            await _answer(send, 408, f"the body did not arrive within {seconds:g} s")
            return None
        if msg["type"] == "http.disconnect":
            return None
        body += msg.get("body", b"")
        if len(body) > limit:
            await _answer(send, 413, f"the body is larger than {limit >> 10} KiB")
            return None
        if not msg.get("more_body"):
            return bytes(body)


def _replaying(body: bytes, receive):
    """A receive() that gives the endpoint the body read already, then waits as the server's
    does (for the client to go)."""
    given = False

    async def replay():
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()
    return replay


def _idle_limited(receive, seconds: float):
    """A receive() for a streamed upload: a client silent for `seconds` between two pieces
    is treated as gone (the upload stops and its file is removed)."""
    async def limited():
        try:
            return await asyncio.wait_for(receive(), seconds)
        except asyncio.TimeoutError:
            return {"type": "http.disconnect"}
    return limited


class Guard:
    def __init__(self, app, svc: Service):
        self.app = app
        self.svc = svc

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        send = _secured(send, head=scope["method"] == "HEAD")
        if scope["method"] == "HEAD":     # answered as GET, without the body
            scope = {**scope, "method": "GET"}
        request = Request(scope)
        if not self.svc.hosts.ok(request.headers.get("host")):
            # DNS rebinding (hctune.serve.hosts): refused before anything is read or done
            return await _answer(send, 421, "this server does not serve the host "
                                 f"{request.headers.get('host', '')[:100]!r} (serve "
                                 "--allowed-host NAME adds one)")
        why = refusal(self.svc, request)
        if why is None:
            if request.method in SAFE:
                return await self.app(scope, receive, send)
            if request.method == "POST" and request.url.path in UPLOADS:
                if not csrf_ok(request):   # a form's upload: its csrf field before its file
                    scope = {**scope, "hctune.csrf": request.cookies.get(CSRF_COOKIE) or ""}
                return await self.app(scope, _idle_limited(receive, IDLE_SECONDS), send)
            body = await _read_body(scope, receive, send, MAX_BODY, BODY_SECONDS)
            if body is None:
                return
            if not csrf_ok(request) and not form_csrf_ok(request, body):
                return await _answer(send, 403, CSRF_REFUSED)
            return await self.app(scope, _replaying(body, receive), send)
        status, msg = why
        path = request.url.path
        wants_page = request.method in SAFE and not path.startswith("/api/") and \
            "text/html" in request.headers.get("accept", "")
        if status == 401 and wants_page:
            headers = [(b"location", b"/login"), (b"content-length", b"0")]
            await send({"type": "http.response.start", "status": 303, "headers": headers})
            await send({"type": "http.response.body", "body": b""})
            return
        # the body is not read: the connection closes after the answer
        await _answer(send, status, msg, retry_after=self.svc.failures.wait(_client(request))
                      if status == 429 else None)


def _secured(send, head: bool):
    """send() with the security headers on every answer; for HEAD, the headers of the GET
    without its body."""
    async def secured(msg):
        if msg["type"] == "http.response.start":
            have = {k.lower() for k, _ in msg.get("headers", ())}
            extra = [h for h in SECURITY_HEADERS if h[0] not in have]
            msg = {**msg, "headers": [*msg.get("headers", ()), *extra]}
        elif head and msg["type"] == "http.response.body":
            if msg.get("more_body"):
                return
            msg = {"type": "http.response.body", "body": b""}
        await send(msg)
    return secured
