"""The token of `hctune serve`: the dependency every guarded endpoint names (need_token) and
the /login form that sets the cookie a browser sends instead of the Authorization header."""

from __future__ import annotations

import hmac

from fastapi import APIRouter, Form, HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse

from hctune.serve.state import COOKIE, service

router = APIRouter()


def need_token(request: Request):
    """Downloads and writes: the token even with --public-read (hctune.serve.guard checks the
    rest before the body is read)."""
    if not service(request).authorised(request):
        raise HTTPException(401 if "authorization" not in request.headers
                            and COOKIE not in request.cookies else 403,
                            "a valid token is required (Authorization: Bearer TOKEN)")


@router.get("/login", response_class=HTMLResponse, include_in_schema=False)
def login_form(request: Request):
    return service(request).page("serve_login.html.j2", request, failed=False)


@router.post("/login", include_in_schema=False)
def login(request: Request, token: str = Form("")):
    svc = service(request)
    expected = svc.cfg.token
    if expected is None or not hmac.compare_digest(token.encode(), expected.encode()):
        return svc.page("serve_login.html.j2", request, status_code=403, failed=True)
    r = RedirectResponse("/", status_code=303)
    r.set_cookie(COOKIE, svc.new_session(), httponly=True, samesite="strict")
    return r


@router.post("/logout", include_in_schema=False)
def logout():
    """Forget the session: the cookie is cleared (a copy of it stays valid until the token
    changes: sessions are signed, not stored)."""
    r = RedirectResponse("/login", status_code=303)
    r.delete_cookie(COOKIE, httponly=True, samesite="strict")
    return r
