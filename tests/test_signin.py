"""Signing in to the inbox page, end to end: a real OIDC provider (npm ``oidc-provider``,
``tests/oidc.py``), a real gateway and worker on the session's Temporal server, and a
person in a real headless Chromium; then the session the cookie holds, its CSRF token,
its end, and the development sign-in."""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import jwt
import pytest
from playwright.async_api import Browser, BrowserContext, Route, expect
from temporalio.client import Client

from gateway.session import AUDIENCE, CSRF_HEADER, SESSION_COOKIE, Sessions
from settings import Settings
from tests.browser import TEST_SESSION_SECRET
from tests.helpers import (
    OWNER,
    Stack,
    eventually,
    free_port,
    new_thread,
    post_run,
    run_input,
    serve_stack,
)
from tests.oidc import CLIENT_ID, CLIENT_SECRET, SCOPES, RunningProvider, issuer_on, oidc_provider

LOOPBACK = re.compile(r"^https?://127\.0\.0\.1[:/]")


@dataclass(frozen=True)
class SignIn:
    """A gateway whose inbox signs in through the provider."""

    stack: Stack
    provider: RunningProvider


@pytest.fixture(scope="module")
async def signin(client: Client) -> AsyncIterator[SignIn]:
    """One provider and one gateway for the module: the gateway knows the provider's
    issuer before it listens, and the provider the gateway's callback."""
    port = free_port()
    async with (
        serve_stack(
            client,
            oidc_issuer=issuer_on(port),
            oidc_client_id=CLIENT_ID,
            oidc_client_secret=CLIENT_SECRET,
            oidc_scopes=SCOPES,
            session_secret=TEST_SESSION_SECRET,
        ) as stack,
        oidc_provider(stack.url, port) as provider,
    ):
        yield SignIn(stack, provider)


async def offline_context(browser: Browser) -> BrowserContext:
    """A browser context (cookies of its own) that reaches loopback only: the provider's
    pages would fetch fonts from the internet, which this machine does not have."""
    context = await browser.new_context()

    async def abort(route: Route) -> None:
        await route.abort()

    await context.route(lambda url: not LOOPBACK.match(url), abort)
    return context


async def sign_in_at_provider(
    browser: Browser, signin: SignIn, login: str, start: str = "/inbox/login"
) -> tuple[BrowserContext, list[str]]:
    """``login`` signs in as a person does: the gateway's sign-in sends them to the
    provider, they type their login and password and consent, and come back. The
    context, and every URL the browser requested."""
    context = await offline_context(browser)
    page = await context.new_page()
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    await page.goto(f"{signin.stack.url}{start}")
    await page.get_by_placeholder("Enter any login").fill(login)
    await page.get_by_placeholder("and password").fill("any password")
    await page.get_by_role("button", name="Sign-in").click()
    await page.get_by_role("button", name="Continue").click()
    await page.wait_for_url(re.compile(re.escape(f"{signin.stack.url}/inbox")))
    requested.append(page.url)
    return context, requested


async def session_of(context: BrowserContext, url: str) -> Any:
    response = await context.request.get(f"{url}/inbox/auth/session")
    assert response.status == 200, await response.text()
    return await response.json()


def cookie_client(url: str, cookie: str, csrf: str | None = None) -> httpx.AsyncClient:
    """An HTTP client holding the session cookie ``cookie`` (and sending ``csrf``)."""
    return httpx.AsyncClient(
        base_url=url,
        cookies={SESSION_COOKIE: cookie},
        headers={CSRF_HEADER: csrf} if csrf is not None else {},
        timeout=30,
    )


def error_code(response: httpx.Response) -> str:
    code: str = response.json()["error"]["code"]
    return code


async def test_a_person_signs_in_through_the_provider_and_the_api_knows_them(
    browser: Browser, signin: SignIn
) -> None:
    url = signin.stack.url
    context, requested = await sign_in_at_provider(
        browser, signin, "carol", "/inbox/login?next=/inbox/threads%3Fstatus%3Dwaiting"
    )
    try:
        # Back where they were going, signed in as the provider says, groups and all.
        assert requested[-1] == f"{url}/inbox/threads?status=waiting"
        session = await session_of(context, url)
        assert (session["subject"], session["groups"]) == ("carol", ["finance"])
        assert session["csrfToken"] and session["expiresAt"]
        # The page's API calls: the cookie alone authenticates them.
        listed = await context.request.get(f"{url}/interrupts")
        assert listed.status == 200, await listed.text()

        # The authorization request: code flow with PKCE (S256), state and nonce.
        [authorize] = [u for u in requested if u.startswith(f"{signin.provider.issuer}/auth?")]
        query = parse_qs(urlsplit(authorize).query)
        assert query["code_challenge_method"] == ["S256"]
        assert len(query["code_challenge"][0]) == 43
        assert query["response_type"] == ["code"]
        assert query["client_id"] == [CLIENT_ID]
        assert query["redirect_uri"] == [f"{url}/inbox/auth/callback"]
        assert query["state"][0] and query["nonce"][0]
        assert query["scope"] == [SCOPES]

        # The gateway's cookies: the session, HttpOnly and SameSite; the pending sign-in
        # gone. (The provider's, on the same loopback host, are its own.)
        cookies = {c["name"]: c for c in await context.cookies(url) if c["name"].startswith("agui")}
        assert set(cookies) == {SESSION_COOKIE}
        assert cookies[SESSION_COOKIE]["httpOnly"]
        assert cookies[SESSION_COOKIE]["sameSite"] == "Lax"
    finally:
        await context.close()


async def test_opening_the_inbox_signed_out_goes_through_the_provider_and_back(
    browser: Browser, signin: SignIn
) -> None:
    context, requested = await sign_in_at_provider(browser, signin, "carol", "/inbox")
    try:
        assert f"{signin.stack.url}/inbox/login?next=%2Finbox" in requested
        [page] = context.pages
        await expect(page.get_by_text("Signed in as carol (finance)")).to_be_visible()
        await expect(page.get_by_role("tab", name="To decide")).to_be_visible()
    finally:
        await context.close()


async def test_signing_out_ends_the_session_here_and_at_the_provider(
    browser: Browser, signin: SignIn
) -> None:
    url = signin.stack.url
    context, _ = await sign_in_at_provider(browser, signin, "erin")
    try:
        session = await session_of(context, url)
        assert session["groups"] == ["ops"]
        [copied] = [c["value"] for c in await context.cookies(url) if c["name"] == SESSION_COOKIE]

        # Without the CSRF token, no sign-out (another site's page cannot end it).
        refused = await context.request.post(f"{url}/inbox/auth/logout")
        assert refused.status == 403
        assert (await session_of(context, url))["subject"] == "erin"

        out = await context.request.post(
            f"{url}/inbox/auth/logout", headers={CSRF_HEADER: session["csrfToken"]}
        )
        assert out.status == 200
        redirect = (await out.json())["redirect"]
        gone = await context.request.get(f"{url}/inbox/auth/session")
        assert gone.status == 401
        assert (await context.request.get(f"{url}/interrupts")).status == 401

        # The provider's end-session endpoint signs them out there too, and sends them back.
        end = urlsplit(redirect)
        assert f"{end.scheme}://{end.netloc}" == signin.provider.issuer
        assert parse_qs(end.query) == {
            "client_id": [CLIENT_ID],
            "post_logout_redirect_uri": [f"{url}/inbox/auth/signed-out"],
        }
        page = await context.new_page()
        await page.goto(redirect)
        await page.get_by_role("button", name="Yes, sign me out").click()
        await page.wait_for_url(f"{url}/inbox/auth/signed-out")
        await page.get_by_role("link", name="Sign in again").wait_for()

        # Sessions are stateless: a copy of the cookie taken before stays valid until its
        # exp (docs/operations.md); signing out ends the browser's, not copies.
        async with cookie_client(url, copied) as http:
            assert (await http.get("/interrupts")).status_code == 200
    finally:
        await context.close()


async def test_a_callback_that_is_not_the_sign_in_started_here_is_refused(
    signin: SignIn,
) -> None:
    url = signin.stack.url
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        started = await http.get("/inbox/login")
        assert started.status_code == 302
        assert started.headers["location"].startswith(f"{signin.provider.issuer}/auth?")
        pending = started.cookies["agui_signin"]
        cases = {
            "wrong state": ("/inbox/auth/callback?code=c&state=wrong", pending),
            "no state": ("/inbox/auth/callback?code=c", pending),
            "no pending sign-in": ("/inbox/auth/callback?code=c&state=s", None),
            "forged pending sign-in": (
                "/inbox/auth/callback?code=c&state=s",
                jwt.encode({"state": "s", "exp": 2**40}, "not-the-secret-" * 3, "HS256"),
            ),
            "provider error": ("/inbox/auth/callback?error=access_denied&state=s", pending),
        }
        for case, (path, cookie) in cases.items():
            http.cookies.clear()
            if cookie:
                http.cookies.set("agui_signin", cookie)
            response = await http.get(path)
            assert response.status_code == 400, case
            assert response.headers["content-type"].startswith("text/html")
            assert 'href="/inbox/login"' in response.text
            assert SESSION_COOKIE not in response.cookies, case

        # The right state with a code the provider never issued: refused by the provider.
        state = parse_qs(urlsplit(started.headers["location"]).query)["state"][0]
        http.cookies.clear()
        http.cookies.set("agui_signin", pending)
        response = await http.get(f"/inbox/auth/callback?code=never-issued&state={state}")
        assert response.status_code == 400
        assert SESSION_COOKIE not in response.cookies


@pytest.mark.parametrize(
    "next_",
    [
        "https://evil.example/inbox",
        "//evil.example/inbox",
        "/inbox//evil.example",
        "/\\evil.example",
        "/inbox\\..\\evil",
        "/threads",
        "javascript:alert(1)",
        "/inboxes",
    ],
)
async def test_next_goes_nowhere_but_the_inbox(signin: SignIn, next_: str) -> None:
    async with httpx.AsyncClient(base_url=signin.stack.url, timeout=30) as http:
        started = await http.get("/inbox/login", params={"next": next_})
        pending = Sessions(Settings(session_secret=TEST_SESSION_SECRET)).verify(
            started.cookies["agui_signin"], "agui-inbox-signin"
        )
        assert pending["next"] == "/inbox"


async def test_an_expired_session_is_refused_as_expired(signin: SignIn) -> None:
    now = int(time.time())
    expired = jwt.encode(
        {"sub": "carol", "groups": ["finance"], "csrf": "x", "aud": AUDIENCE, "exp": now - 60},
        TEST_SESSION_SECRET,
        algorithm="HS256",
    )
    async with cookie_client(signin.stack.url, expired, "x") as http:
        for response in (await http.get("/interrupts"), await http.get("/inbox/auth/session")):
            assert response.status_code == 401
            assert error_code(response) == "SESSION_EXPIRED"


async def ask_finance(stack: Stack, amount: int) -> tuple[str, dict[str, Any]]:
    """The owner's ``payments`` thread waiting on finance's approval of ``amount``."""
    thread_id = new_thread()
    events = await post_run(
        stack.http, "payments", run_input(thread_id, "r1", f"pay {amount} to ACME")
    )
    [interrupt] = events[-1]["outcome"]["interrupts"]
    return thread_id, interrupt


async def test_a_decision_without_the_sessions_csrf_token_changes_nothing(
    signin: SignIn,
) -> None:
    stack = signin.stack
    thread_id, interrupt = await ask_finance(stack, 250)
    value, carol = Sessions(Settings(session_secret=TEST_SESSION_SECRET)).issue(
        "carol", ["finance"]
    )
    path = f"/threads/{thread_id}/interrupts/{interrupt['id']}/decisions"
    approve = {"status": "resolved", "payload": {"approved": True}}

    for csrf in (None, "", "forged-" + carol.csrf, carol.csrf.upper()):
        async with cookie_client(stack.url, value, csrf) as http:
            refused = await http.post(path, json=approve)
            assert refused.status_code == 403, csrf
            assert error_code(refused) == "CSRF_FAILED"
    thread = (await stack.http.get(f"/threads/{thread_id}")).json()
    assert thread["status"] == "waiting"

    async with cookie_client(stack.url, value, carol.csrf) as http:
        # Reading needs no token; the finance member sees what waits on finance.
        async def listed() -> bool:
            page = (await http.get("/interrupts")).json()
            return interrupt["id"] in [i["interrupt"]["id"] for i in page["interrupts"]]

        await eventually(listed, what="finance's inbox to list the payment")
        decided = await http.post(path, json=approve)
        assert decided.status_code == 200, decided.text
        assert decided.json()["outcome"] == "settled"


@pytest.fixture(scope="module")
async def dev_stack(client: Client) -> AsyncIterator[Stack]:
    """A gateway with the development sign-in on, as ``make run`` has it."""
    async with serve_stack(
        client, inbox_dev_signin=True, session_secret=TEST_SESSION_SECRET
    ) as stack:
        yield stack


async def test_development_sign_in_is_off_unless_turned_on(signin: SignIn) -> None:
    async with httpx.AsyncClient(base_url=signin.stack.url, timeout=30) as http:
        refused = await http.post(
            "/inbox/auth/dev", data={"user": "mallory", "groups": "agui-admins"}
        )
        assert refused.status_code == 404
        assert SESSION_COOKIE not in refused.cookies
    async with serve_stack(
        None,
        oidc_issuer=signin.provider.issuer,
        oidc_client_id=CLIENT_ID,
        inbox_dev_signin=True,
        session_secret=TEST_SESSION_SECRET,
    ) as both:
        # Never beside a provider: it would bypass the provider's sign-in.
        refused = await both.http.post("/inbox/auth/dev", data={"user": "mallory"})
        assert refused.status_code == 404
    async with serve_stack(None, session_secret=TEST_SESSION_SECRET) as bare:
        page = await bare.http.get("/inbox/login")
        assert page.status_code == 404
        assert "AGUI_INBOX_DEV_SIGNIN" in page.text and "AGUI_OIDC_ISSUER" in page.text
        assert TEST_SESSION_SECRET not in page.text
        assert (await bare.http.post("/inbox/auth/dev", data={"user": "x"})).status_code == 404


async def test_development_sign_in_signs_in_as_typed(browser: Browser, dev_stack: Stack) -> None:
    url = dev_stack.url
    thread_id, interrupt = await ask_finance(dev_stack, 300)
    context = await offline_context(browser)
    try:
        page = await context.new_page()
        await page.goto(f"{url}/inbox/login?next=/inbox/t")
        await page.get_by_label("User").fill("dave")
        await page.get_by_label("Groups").fill(" finance , cfo ")
        await page.get_by_role("button", name="Sign in").click()
        await page.wait_for_url(f"{url}/inbox/t")

        session = await session_of(context, url)
        assert (session["subject"], session["groups"]) == ("dave", ["cfo", "finance"])

        async def listed() -> bool:
            response = await context.request.get(f"{url}/interrupts")
            items = (await response.json())["interrupts"]
            return (thread_id, interrupt["id"]) in [
                (i["threadId"], i["interrupt"]["id"]) for i in items
            ]

        await eventually(listed, what="dave (finance) to see the payment in his inbox")
        assert OWNER != "dave"
    finally:
        await context.close()


async def test_development_sign_in_needs_its_form_and_a_user(dev_stack: Stack) -> None:
    async with httpx.AsyncClient(base_url=dev_stack.url, timeout=30) as http:
        form = await http.get("/inbox/login")
        assert form.status_code == 200
        assert "script" not in form.text
        assert "default-src 'none'" in form.headers["content-security-policy"]
        csrf = re.search(r'name="csrf" value="([^"]+)"', form.text)
        assert csrf is not None

        # Another site's form (no login-CSRF cookie, or a token not the cookie's).
        http.cookies.clear()
        forged = await http.post("/inbox/auth/dev", data={"user": "x", "csrf": csrf[1]})
        assert forged.status_code == 400 and SESSION_COOKIE not in forged.cookies

        for fields in ({"user": ""}, {"user": "u" * 129}, {"user": "u", "groups": "g" * 129}):
            http.cookies.clear()
            http.cookies.set("agui_signin_csrf", csrf[1])
            response = await http.post("/inbox/auth/dev", data={**fields, "csrf": csrf[1]})
            assert response.status_code == 400, fields
            assert SESSION_COOKIE not in response.cookies
            assert 'role="alert"' in response.text


async def test_a_provider_that_is_down_is_a_clear_page_not_a_crash() -> None:
    async with serve_stack(
        None,
        oidc_issuer=issuer_on(free_port()),
        oidc_client_id=CLIENT_ID,
        session_secret=TEST_SESSION_SECRET,
    ) as gateway:
        response = await gateway.http.get("/inbox/login")
        assert response.status_code == 502
        assert "cannot be reached" in response.text
        assert 'href="/inbox/login"' in response.text
