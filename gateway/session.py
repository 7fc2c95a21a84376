"""The inbox page's sessions: who signed in, held in a cookie, and the CSRF token their
state-changing requests carry.

A session is a JWT (HS256, signed with ``AGUI_SESSION_SECRET``) in the ``HttpOnly``,
``SameSite=Lax`` cookie :data:`SESSION_COOKIE`. It is stateless, so every replica with
the same secret reads it, and it ends at its ``exp`` (``AGUI_SESSION_TTL_SECONDS``).
Its audience (:data:`AUDIENCE`) keeps it from ever passing as a bearer token.

The CSRF token is a claim of the session. The page reads it from the session endpoint
(the cookie is out of its scripts' reach) and sends it as :data:`CSRF_HEADER` with every
request that changes something. A page of another origin can make the browser send the
cookie, but it cannot read the token, so its forged requests are refused.
"""

from __future__ import annotations

import hmac
import logging
import secrets
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import jwt
from fastapi import Request, Response

from gateway.auth import Principal
from gateway.errors import ApiError, GatewayErrorCode
from settings import Settings

logger = logging.getLogger(__name__)

SESSION_COOKIE = "agui_session"
CSRF_HEADER = "X-CSRF-Token"
AUDIENCE = "agui-inbox-session"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
"""Methods that change nothing: the only ones a session's request may send without its
CSRF token."""
MIN_SECRET_CHARS = 32


@dataclass(frozen=True)
class Session:
    """Who signed in, until when, and the token their changes must carry."""

    subject: str
    groups: frozenset[str]
    csrf: str
    expires_at: int
    """Seconds since the epoch."""

    def principal(self, admin_group: str) -> Principal:
        return Principal(self.subject, self.groups, admin=admin_group in self.groups)


class Sessions:
    """Issues and reads session cookies with the gateway's session secret.

    Raises:
        ValueError: ``AGUI_SESSION_SECRET`` is shorter than :data:`MIN_SECRET_CHARS`.
    """

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        if settings.session_secret is None:
            self._secret = secrets.token_urlsafe(32)
        else:
            self._secret = settings.session_secret.get_secret_value()
            if len(self._secret) < MIN_SECRET_CHARS:
                raise ValueError(
                    f"AGUI_SESSION_SECRET needs {MIN_SECRET_CHARS} characters or more."
                )

    def issue(self, subject: str, groups: Iterable[str]) -> tuple[str, Session]:
        """A new session for ``subject`` in ``groups``: the cookie's value, and what it says."""
        now = int(time.time())
        session = Session(
            subject,
            frozenset(groups),
            csrf=secrets.token_urlsafe(32),
            expires_at=now + self._settings.session_ttl_seconds,
        )
        claims: dict[str, Any] = {
            "sub": session.subject,
            "groups": sorted(session.groups),
            "csrf": session.csrf,
            "aud": AUDIENCE,
            "iat": now,
            "exp": session.expires_at,
        }
        return jwt.encode(claims, self._secret, algorithm="HS256"), session

    def read(self, value: str) -> Session:
        """The session a cookie holds.

        Raises:
            ApiError: 401 ``SESSION_EXPIRED`` for one past its end, 401
                ``UNAUTHENTICATED`` for one this gateway did not sign.
        """
        try:
            claims = jwt.decode(
                value,
                self._secret,
                algorithms=["HS256"],
                audience=AUDIENCE,
                options={"require": ["exp", "sub", "csrf"]},
            )
        except jwt.ExpiredSignatureError as error:
            raise ApiError(
                401, GatewayErrorCode.SESSION_EXPIRED, "Your session has expired; sign in again."
            ) from error
        except jwt.InvalidTokenError as error:
            raise ApiError(
                401, GatewayErrorCode.UNAUTHENTICATED, "The session is not valid; sign in again."
            ) from error
        groups = claims.get("groups", [])
        if not isinstance(groups, list) or not all(isinstance(g, str) for g in groups):
            raise ApiError(401, GatewayErrorCode.UNAUTHENTICATED, "The session is not valid.")
        return Session(claims["sub"], frozenset(groups), claims["csrf"], claims["exp"])

    def sign(self, claims: dict[str, Any], audience: str, ttl_seconds: int) -> str:
        """``claims`` signed with the session secret for ``audience``, for ``ttl_seconds``:
        the sign-in's own short-lived cookies, which the audience keeps from ever passing
        as a session (or a session as one of them)."""
        now = int(time.time())
        signed = {**claims, "aud": audience, "iat": now, "exp": now + ttl_seconds}
        return jwt.encode(signed, self._secret, algorithm="HS256")

    def verify(self, value: str, audience: str) -> dict[str, Any]:
        """The claims of a value :meth:`sign` made for ``audience``, still in its time.

        Raises:
            jwt.InvalidTokenError: It is not one, or its time is up.
        """
        claims: dict[str, Any] = jwt.decode(
            value,
            self._secret,
            algorithms=["HS256"],
            audience=audience,
            options={"require": ["exp"]},
        )
        return claims

    def set_cookie(self, request: Request, response: Response, value: str) -> None:
        """Put the session ``value`` in ``response``'s cookie, ``Secure`` over HTTPS."""
        response.set_cookie(
            SESSION_COOKIE,
            value,
            max_age=self._settings.session_ttl_seconds,
            path="/",
            secure=self.secure(request),
            httponly=True,
            samesite="lax",
        )

    def clear_cookie(self, request: Request, response: Response) -> None:
        """End the browser's session: its cookie is deleted."""
        response.delete_cookie(
            SESSION_COOKIE, path="/", secure=self.secure(request), httponly=True, samesite="lax"
        )

    def secure(self, request: Request) -> bool:
        """Whether browsers reach the gateway over HTTPS (then cookies are ``Secure``)."""
        public_url = self._settings.public_url
        if public_url:
            return public_url.startswith("https://")
        return request.url.scheme == "https"


def check_csrf(request: Request, session: Session) -> None:
    """Refuse a state-changing request of ``session`` without its CSRF token.

    Raises:
        ApiError: 403 ``CSRF_FAILED``.
    """
    if request.method in SAFE_METHODS:
        return
    sent = request.headers.get(CSRF_HEADER, "")
    if not hmac.compare_digest(sent.encode(), session.csrf.encode()):
        raise ApiError(
            403,
            GatewayErrorCode.CSRF_FAILED,
            f"This request needs the session's {CSRF_HEADER} header; reload the page.",
        )
