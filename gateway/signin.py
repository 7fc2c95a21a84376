"""Signing in to the inbox page: the session a browser holds (``gateway/session.py``),
and ending it.
"""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi import APIRouter, Request, Response

from gateway.errors import ApiError, GatewayErrorCode
from gateway.session import SESSION_COOKIE, Session, Sessions, check_csrf
from workflows.models import Model

# The page's own routes, not the API's: they are not in its OpenAPI description.
router = APIRouter(include_in_schema=False)


class SessionView(Model):
    """The signed-in person, as the page shows them, and the CSRF token its requests that
    change something carry as ``X-CSRF-Token``."""

    subject: str
    groups: list[str]
    csrf_token: str
    expires_at: datetime


class SignedOut(Model):
    redirect: str
    """Where the page goes next."""


def current_session(request: Request) -> Session:
    """The request's session.

    Raises:
        ApiError: 401 without one (``UNAUTHENTICATED``) or past its end (``SESSION_EXPIRED``).
    """
    cookie = request.cookies.get(SESSION_COOKIE)
    if not cookie:
        raise ApiError(401, GatewayErrorCode.UNAUTHENTICATED, "Not signed in.")
    sessions: Sessions = request.app.state.sessions
    return sessions.read(cookie)


@router.get("/inbox/auth/session")
async def session(request: Request) -> SessionView:
    """Who is signed in, and their CSRF token."""
    current = current_session(request)
    return SessionView(
        subject=current.subject,
        groups=sorted(current.groups),
        csrf_token=current.csrf,
        expires_at=datetime.fromtimestamp(current.expires_at, UTC),
    )


@router.post("/inbox/auth/logout")
async def logout(request: Request, response: Response) -> SignedOut:
    """End the browser's session (its CSRF token required)."""
    check_csrf(request, current_session(request))
    sessions: Sessions = request.app.state.sessions
    sessions.clear_cookie(request, response)
    return SignedOut(redirect="/inbox/login")
