"""The inbox page's sessions in isolation: what a cookie says, every way one can be
wrong, the CSRF check, and that a session and a bearer token never pass for each other
even when one secret signs both."""

from __future__ import annotations

import time
from typing import Any

import httpx
import jwt
import pytest
from starlette.requests import Request

from gateway.auth import Authenticator
from gateway.errors import ApiError
from gateway.session import AUDIENCE, CSRF_HEADER, Session, Sessions, check_csrf
from gateway.tokens import mint
from settings import Settings

SECRET = "unit-test-session-secret-0123456789abcdef"
SETTINGS = Settings(session_secret=SECRET, session_ttl_seconds=600)


def code_of(error: pytest.ExceptionInfo[ApiError]) -> tuple[int, str]:
    return error.value.status, error.value.code.value


def signed(claims: dict[str, Any], secret: str = SECRET) -> str:
    return jwt.encode(claims, secret, algorithm="HS256")


def test_a_session_says_who_until_when_and_its_csrf_token() -> None:
    sessions = Sessions(SETTINGS)
    value, issued = sessions.issue("carol", ["finance", "ops"])

    read = sessions.read(value)
    assert read == issued
    assert (read.subject, read.groups) == ("carol", frozenset({"finance", "ops"}))
    assert abs(read.expires_at - (time.time() + 600)) < 5
    assert len(read.csrf) >= 32
    assert read.principal("finance").admin and not read.principal("agui-admins").admin
    # Each sign-in has a CSRF token of its own.
    assert sessions.issue("carol", [])[1].csrf != issued.csrf


def test_a_session_past_its_end_is_expired() -> None:
    claims = {"sub": "carol", "csrf": "t", "aud": AUDIENCE, "exp": int(time.time()) - 1}
    with pytest.raises(ApiError) as error:
        Sessions(SETTINGS).read(signed(claims))
    assert code_of(error) == (401, "SESSION_EXPIRED")


@pytest.mark.parametrize(
    "value",
    [
        "",
        "not-a-jwt",
        signed({"sub": "c", "csrf": "t", "aud": AUDIENCE, "exp": 2**40}, "another-secret-" * 3),
        signed({"sub": "c", "csrf": "t", "aud": "someone-else", "exp": 2**40}),
        signed({"sub": "c", "csrf": "t", "exp": 2**40}),
        signed({"sub": "c", "aud": AUDIENCE, "exp": 2**40}),
        signed({"sub": "c", "csrf": "t", "aud": AUDIENCE}),
        signed({"sub": "c", "csrf": "t", "aud": AUDIENCE, "exp": 2**40, "groups": "finance"}),
        jwt.encode({"sub": "c", "csrf": "t", "aud": AUDIENCE, "exp": 2**40}, None, "none"),
    ],
    ids=[
        "empty",
        "garbage",
        "forged-signature",
        "wrong-audience",
        "no-audience",
        "no-csrf",
        "no-exp",
        "groups-not-a-list",
        "alg-none",
    ],
)
def test_a_session_this_gateway_did_not_sign_is_refused(value: str) -> None:
    with pytest.raises(ApiError) as error:
        Sessions(SETTINGS).read(value)
    assert code_of(error) == (401, "UNAUTHENTICATED")


def test_a_short_secret_is_refused_at_start() -> None:
    with pytest.raises(ValueError, match="32 characters"):
        Sessions(Settings(session_secret="short"))


def test_a_gateway_without_a_secret_makes_its_own() -> None:
    ours, theirs = Sessions(Settings()), Sessions(Settings())
    value, _ = ours.issue("carol", [])
    assert ours.read(value).subject == "carol"
    with pytest.raises(ApiError):
        theirs.read(value)


def test_the_sign_ins_own_cookies_never_pass_as_a_session_nor_a_session_as_one() -> None:
    sessions = Sessions(SETTINGS)
    pending = sessions.sign({"sub": "carol", "csrf": "t", "state": "s"}, "agui-inbox-signin", 60)
    assert sessions.verify(pending, "agui-inbox-signin")["state"] == "s"
    with pytest.raises(ApiError):
        sessions.read(pending)
    value, _ = sessions.issue("carol", [])
    with pytest.raises(jwt.InvalidTokenError):
        sessions.verify(value, "agui-inbox-signin")
    with pytest.raises(jwt.ExpiredSignatureError):
        sessions.verify(sessions.sign({}, "agui-inbox-signin", -1), "agui-inbox-signin")


async def test_a_session_and_a_bearer_token_never_pass_for_each_other() -> None:
    """Even with one secret for both (a misconfiguration, but a possible one)."""
    settings = Settings(session_secret=SECRET, auth_hs256_secret=SECRET)
    sessions = Sessions(settings)
    session, _ = sessions.issue("carol", ["agui-admins"])
    async with httpx.AsyncClient() as http:
        with pytest.raises(ApiError) as error:
            await Authenticator(settings, http).principal(session)
    assert code_of(error) == (401, "UNAUTHENTICATED")

    token = mint(SECRET, "carol", ["agui-admins"], settings=settings)
    with pytest.raises(ApiError) as error:
        sessions.read(token)
    assert code_of(error) == (401, "UNAUTHENTICATED")


def request(method: str, csrf: str | None) -> Request:
    headers = [(CSRF_HEADER.lower().encode(), csrf.encode())] if csrf is not None else []
    return Request({"type": "http", "method": method, "headers": headers, "path": "/"})


SESSION = Session("carol", frozenset(), csrf="the-token", expires_at=2**40)


@pytest.mark.parametrize("method", ["GET", "HEAD", "OPTIONS"])
def test_reading_needs_no_csrf_token(method: str) -> None:
    check_csrf(request(method, None), SESSION)


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE"])
@pytest.mark.parametrize("csrf", [None, "", "the-token ", "THE-TOKEN", "the-toke", "forged"])
def test_changing_anything_needs_the_sessions_csrf_token(method: str, csrf: str | None) -> None:
    with pytest.raises(ApiError) as error:
        check_csrf(request(method, csrf), SESSION)
    assert code_of(error) == (403, "CSRF_FAILED")
    check_csrf(request(method, "the-token"), SESSION)
