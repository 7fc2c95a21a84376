"""Headless Chromium for the inbox page's tests: Debian's ``chromium`` package, which
``make test`` installs (``scripts/install-chromium``), driven by Playwright's driver.
Playwright never downloads a browser here: it launches that executable."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

from playwright.async_api import Browser, BrowserContext, async_playwright

from gateway.session import SESSION_COOKIE, Sessions
from settings import Settings

CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    # The machine's network is closed: without these, Chromium keeps trying to reach
    # Google's services in the background.
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
TEST_SESSION_SECRET = "agui-test-session-secret-0123456789abcdef"
"""The session secret of the gateways the page's tests sign in to."""


@asynccontextmanager
async def chromium() -> AsyncIterator[Browser]:
    """A headless Chromium, closed on exit."""
    if not CHROMIUM.exists():
        raise RuntimeError(f"No {CHROMIUM}: run scripts/install-chromium (make test does).")
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=ARGS
        )
        try:
            yield browser
        finally:
            await browser.close()


async def signed_in(
    browser: Browser, url: str, subject: str, groups: Sequence[str] = ()
) -> BrowserContext:
    """A browser context (its own cookies) holding a session of ``subject`` in ``groups``
    at the gateway at ``url``, whose session secret is :data:`TEST_SESSION_SECRET`."""
    sessions = Sessions(Settings(session_secret=TEST_SESSION_SECRET))
    value, _ = sessions.issue(subject, groups)
    context = await browser.new_context()
    await context.add_cookies(
        [{"name": SESSION_COOKIE, "value": value, "url": url, "httpOnly": True, "sameSite": "Lax"}]
    )
    return context
