"""Signing in to the inbox page: through the organisation's OIDC provider
(``gateway/oidc.py``), or in development as anyone; the session a browser then holds
(``gateway/session.py``), and ending it.

- ``GET /inbox/login?next=/inbox...`` starts the sign-in: a redirect to the provider,
  the development form, or a page saying how to configure one.
- ``GET /inbox/auth/callback`` is where the provider sends the browser back: the code is
  exchanged, the ID token verified, and the session cookie set.
- ``POST /inbox/auth/dev`` is the development form's (``AGUI_INBOX_DEV_SIGNIN``).
- ``GET /inbox/auth/session`` says who is signed in, with their CSRF token;
  ``POST /inbox/auth/logout`` ends the session (and, with a provider that has an
  end-session endpoint, sends the browser there; it comes back to
  ``/inbox/auth/signed-out``).

What the callback must match (``state``, ``nonce``, the PKCE ``code_verifier``, where to
go next) waits in a cookie of its own, signed with the session secret, sent only to the
callback, for ten minutes. The development form carries a login-CSRF token that must
equal its cookie's (double submit), so no other site can sign a browser in.
"""

from __future__ import annotations

import logging
import re
import secrets
from datetime import UTC, datetime
from typing import Annotated, Literal
from urllib.parse import parse_qs

import jwt
from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import RedirectResponse

from gateway import signin_pages
from gateway.errors import ApiError, GatewayErrorCode
from gateway.oidc import OidcClient, PendingSignIn, ProviderUnavailable, SignInRefused
from gateway.session import SESSION_COOKIE, Session, Sessions, check_csrf
from settings import Settings
from workflows.budgets import MAX_APPROVER_NAME_CHARS, MAX_APPROVERS
from workflows.models import Model

logger = logging.getLogger(__name__)

# The page's own routes, not the API's: they are not in its OpenAPI description.
router = APIRouter(include_in_schema=False)

INBOX = "/inbox"
CALLBACK_PATH = "/inbox/auth/callback"
SIGNED_OUT_PATH = "/inbox/auth/signed-out"
PENDING_COOKIE = "agui_signin"
"""The sign-in under way: what the callback must match."""
PENDING_AUDIENCE = "agui-inbox-signin"
PENDING_TTL_SECONDS = 600
"""How long a person has at the provider before the callback is refused."""
LOGIN_CSRF_COOKIE = "agui_signin_csrf"
"""The development form's login-CSRF token, sent only to the form's target."""
DEV_PATH = signin_pages.DEV_SIGNIN_PATH
MAX_NEXT_CHARS = 2048
MAX_FORM_BYTES = 8 * 1024
MAX_FORM_FIELDS = 8
MAX_USER_CHARS = 128
SAFE_NEXT = re.compile(r"^/inbox(?:[/?#][\x21-\x7e]*)?$")
"""A path of the inbox: printable ASCII, no spaces or controls (``//`` is refused apart)."""


class SessionView(Model):
    """The signed-in person, as the page shows them, and the CSRF token its requests that
    change something carry as ``X-CSRF-Token``."""

    subject: str
    groups: list[str]
    csrf_token: str
    expires_at: datetime


class SignedOut(Model):
    redirect: str
    """Where the page goes next: the sign-in page, or the provider's end-session URL."""


def safe_next(value: str | None) -> str:
    """``value`` if it is a path of the inbox on this gateway, else ``/inbox``: a link
    to the sign-in cannot send anyone to another site after it."""
    if (
        value
        and len(value) <= MAX_NEXT_CHARS
        and SAFE_NEXT.match(value)
        and "//" not in value
        and "\\" not in value
    ):
        return value
    return INBOX


def base_url(request: Request) -> str:
    """The gateway's address as browsers reach it."""
    settings: Settings = request.app.state.settings
    return (settings.public_url or str(request.base_url)).rstrip("/")


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


def _sessions(request: Request) -> Sessions:
    sessions: Sessions = request.app.state.sessions
    return sessions


def _oidc(request: Request) -> OidcClient | None:
    oidc: OidcClient | None = request.app.state.oidc
    return oidc


def _dev_signin(request: Request) -> bool:
    """Whether the development sign-in is on: never beside a provider, whose sign-in
    it would bypass."""
    settings: Settings = request.app.state.settings
    return settings.inbox_dev_signin and _oidc(request) is None


def _signed_in(request: Request, subject: str, groups: list[str], next_path: str) -> Response:
    """The browser, now holding a session, sent on to ``next_path``."""
    sessions = _sessions(request)
    value, _ = sessions.issue(subject, groups)
    response = RedirectResponse(next_path, status_code=303)
    sessions.set_cookie(request, response, value)
    return response


@router.get("/inbox/login")
async def login(
    request: Request, next_: Annotated[str | None, Query(alias="next")] = None
) -> Response:
    """Start signing in, then go to ``next`` (a path of the inbox)."""
    next_path = safe_next(next_)
    oidc = _oidc(request)
    if oidc is not None:
        try:
            url, pending = await oidc.authorization(f"{base_url(request)}{CALLBACK_PATH}")
        except ProviderUnavailable as error:
            logger.error("sign-in could not start: %s", error)
            return signin_pages.failed(
                "The organisation's sign-in service cannot be reached; try again in a moment.",
                502,
            )
        response: Response = RedirectResponse(url, status_code=302)
        claims = {
            "state": pending.state,
            "nonce": pending.nonce,
            "verifier": pending.code_verifier,
            "next": next_path,
        }
        response.set_cookie(
            PENDING_COOKIE,
            _sessions(request).sign(claims, PENDING_AUDIENCE, PENDING_TTL_SECONDS),
            max_age=PENDING_TTL_SECONDS,
            path=CALLBACK_PATH,
            secure=_sessions(request).secure(request),
            httponly=True,
            # Lax: the provider's redirect back is a top-level GET from its site.
            samesite="lax",
        )
        return response
    if _dev_signin(request):
        csrf = secrets.token_urlsafe(32)
        response = signin_pages.dev_signin_form(csrf, next_path)
        _set_login_csrf(request, response, csrf)
        return response
    return signin_pages.not_configured()


@router.get(CALLBACK_PATH)
async def callback(
    request: Request,
    code: str | None = None,
    state: str | None = None,
    error: str | None = None,
) -> Response:
    """The provider's answer: the session, or a page saying why there is none."""
    oidc = _oidc(request)
    if oidc is None:
        return signin_pages.not_configured()
    pending_cookie = request.cookies.get(PENDING_COOKIE)
    if error is not None:
        # The provider's error code only: its description may echo request parameters.
        logger.warning("sign-in refused by the provider: %.64r", error)
        return _failed(request, "The sign-in service did not sign you in.", 400)
    try:
        claims = _sessions(request).verify(pending_cookie or "", PENDING_AUDIENCE)
    except jwt.InvalidTokenError:
        logger.warning("sign-in callback without a valid pending sign-in (expired or forged)")
        return _failed(request, "This sign-in has expired or was not started here.", 400)
    if not (state and code and secrets.compare_digest(state.encode(), claims["state"].encode())):
        logger.warning("sign-in callback whose state is not the pending sign-in's")
        return _failed(request, "This sign-in does not match the one started here.", 400)
    pending = PendingSignIn(claims["state"], claims["nonce"], claims["verifier"])
    try:
        identity = await oidc.sign_in(code, pending, f"{base_url(request)}{CALLBACK_PATH}")
    except ProviderUnavailable as failure:
        logger.error("sign-in failed: %s", failure)
        return _failed(
            request, "The organisation's sign-in service cannot be reached; try again.", 502
        )
    except SignInRefused as failure:
        logger.warning("sign-in refused: %s", failure)
        return _failed(request, "The sign-in service's answer could not be accepted.", 400)
    response = _signed_in(request, identity.subject, identity.groups, safe_next(claims["next"]))
    _clear_pending(request, response)
    logger.info("signed in to the inbox: %s", identity.subject)
    return response


@router.post(DEV_PATH)
async def dev_signin(request: Request) -> Response:
    """The development form: a session for the user and groups typed."""
    if not _dev_signin(request):
        raise ApiError(404, GatewayErrorCode.UNKNOWN_ROUTE, "Development sign-in is off.")
    field = _form(await request.body())
    cookie = request.cookies.get(LOGIN_CSRF_COOKIE, "")
    sent = field.get(signin_pages.LOGIN_CSRF_FIELD, "")
    next_path = safe_next(field.get("next"))
    if not (cookie and secrets.compare_digest(sent.encode(), cookie.encode())):
        csrf = secrets.token_urlsafe(32)
        again = signin_pages.dev_signin_form(
            csrf, next_path, "This form has expired; sign in again."
        )
        _set_login_csrf(request, again, csrf)
        return again
    user = field.get("user", "")
    groups = [group.strip() for group in field.get("groups", "").split(",") if group.strip()]
    problem = _dev_problem(user, groups)
    if problem:
        return signin_pages.dev_signin_form(cookie, next_path, problem)
    logger.warning("development sign-in to the inbox: %s in %s", user, groups)
    response = _signed_in(request, user, groups, next_path)
    _drop_cookie(request, response, LOGIN_CSRF_COOKIE, DEV_PATH, "strict")
    return response


def _form(body: bytes) -> dict[str, str]:
    """A small ``application/x-www-form-urlencoded`` body's fields (first values); one
    too large or with too many fields reads as empty, which the form then refuses."""
    if len(body) > MAX_FORM_BYTES:
        return {}
    try:
        form = parse_qs(body.decode("utf-8", "replace"), max_num_fields=MAX_FORM_FIELDS)
    except ValueError:
        return {}
    return {name: values[0].strip() for name, values in form.items()}


def _dev_problem(user: str, groups: list[str]) -> str | None:
    """What is wrong with a development sign-in, in a sentence; ``None``: nothing.

    Names are held to what approver policies may name (``workflows/budgets.py``), and
    the groups' count too, which also keeps the session cookie well under 4 KiB."""
    if not 1 <= len(user) <= MAX_USER_CHARS:
        return f"A user has 1 to {MAX_USER_CHARS} characters."
    if len(groups) > MAX_APPROVERS:
        return f"At most {MAX_APPROVERS} groups."
    if any(len(group) > MAX_APPROVER_NAME_CHARS for group in groups):
        return f"A group has 1 to {MAX_APPROVER_NAME_CHARS} characters."
    return None


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
    """End the browser's session (its CSRF token required).

    Sessions are stateless: this deletes the browser's cookie, and a copy of it taken
    before stays valid until its ``exp`` (``docs/operations.md``)."""
    check_csrf(request, current_session(request))
    _sessions(request).clear_cookie(request, response)
    redirect = signin_pages.LOGIN_PATH
    oidc = _oidc(request)
    if oidc is not None:
        try:
            end_session = await oidc.end_session_url(f"{base_url(request)}{SIGNED_OUT_PATH}")
        except ProviderUnavailable as error:
            # Signed out here all the same; the provider's own session outlives it.
            logger.warning("the provider's end-session endpoint is unknown: %s", error)
            end_session = None
        redirect = end_session or redirect
    return SignedOut(redirect=redirect)


@router.get(SIGNED_OUT_PATH)
async def signed_out() -> Response:
    """Where the provider sends the browser back after signing it out."""
    return signin_pages.signed_out()


def _failed(request: Request, sentence: str, status: int) -> Response:
    response = signin_pages.failed(sentence, status)
    _clear_pending(request, response)
    return response


def _clear_pending(request: Request, response: Response) -> None:
    _drop_cookie(request, response, PENDING_COOKIE, CALLBACK_PATH, "lax")


def _drop_cookie(
    request: Request,
    response: Response,
    name: str,
    path: str,
    samesite: Literal["lax", "strict"],
) -> None:
    """Delete the sign-in's own cookie ``name``, set at ``path`` with ``samesite``."""
    response.delete_cookie(
        name,
        path=path,
        secure=_sessions(request).secure(request),
        httponly=True,
        samesite=samesite,
    )


def _set_login_csrf(request: Request, response: Response, value: str) -> None:
    response.set_cookie(
        LOGIN_CSRF_COOKIE,
        value,
        max_age=3600,
        path=DEV_PATH,
        secure=_sessions(request).secure(request),
        httponly=True,
        # Strict: a page of another site cannot even make the browser send it.
        samesite="strict",
    )
