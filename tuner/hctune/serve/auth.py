"""The token of `hctune serve`: the dependency every guarded endpoint names (need_token) and
the /login form that sets the cookie a browser sends instead of the Authorization header, and
/logout, which ends that session on the server (hctune.serve.state: hc_sessions)."""

from __future__ import annotations

import hmac

from fastapi import APIRouter, Form, HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse

from hctune.serve.guard import forged
from hctune.serve.state import COOKIE, service, session_seconds

router = APIRouter()


def need_token(request: Request):
    """Downloads and writes: the token even with --public-read (hctune.serve.guard checks the
    rest before the body is read)."""
    svc = service(request)
    if not svc.authorised(request):
        raise HTTPException(403 if forged(svc, request) else 401,
                            "a valid token is required (Authorization: Bearer TOKEN)")


@router.get("/login", response_class=HTMLResponse, include_in_schema=False)
def login_form(request: Request):
    return service(request).page("serve_login.html.j2", request, failed=False)


@router.post("/login", include_in_schema=False)
def login(request: Request, token: str = Form("")):
    svc = service(request)
    expected = svc.cfg.token
    if expected is None or not hmac.compare_digest(token.encode(), expected.encode()):
        svc.failures.add(request.client.host if request.client else "")
        return svc.page("serve_login.html.j2", request, status_code=403, failed=True)
    r = RedirectResponse("/", status_code=303)
    r.set_cookie(COOKIE, svc.new_session(), httponly=True, samesite="strict",
                 max_age=session_seconds())
    return r


@router.post("/logout", include_in_schema=False)
def logout(request: Request):
    """End the session: it is deleted from the server's store (a copy of the cookie stops
    working too) and the cookie is cleared."""
    service(request).end_session(request)
    r = RedirectResponse("/login", status_code=303)
    r.delete_cookie(COOKIE, httponly=True, samesite="strict")
    return r
