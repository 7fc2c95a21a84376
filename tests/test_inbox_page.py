"""The inbox page end to end: a real headless Chromium (Debian's, driven by Playwright)
on the gateway's ``/inbox``, signed in with session cookies, over a real worker and
Temporal dev server.

With ``AGUI_SCREENSHOTS=docs`` (``make screenshots``) the tests also write the
screenshots ``docs/inbox.md`` shows.
"""

from __future__ import annotations

import os
import re
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.async_api import Browser, BrowserContext, ConsoleMessage, Page, Request, expect
from temporalio.client import Client

from gateway import page as page_module
from tests.browser import TEST_SESSION_SECRET, signed_in
from tests.helpers import Stack, bearer, eventually, new_thread, post_run, run_input, serve_stack

DOCS = Path(__file__).resolve().parent.parent / "docs"
FINANCE = ["finance"]
PHONE = {"width": 375, "height": 740}
SETTLE_SECONDS = 20_000
"""How long (ms) the page may take to show what the server did: a few polls."""


@pytest.fixture(scope="module")
async def stack(client: Client) -> AsyncIterator[Stack]:
    """One worker and gateway for the module, whose gateway accepts the tests' sessions."""
    async with serve_stack(client, session_secret=TEST_SESSION_SECRET) as running:
        yield running


class Opened:
    """A signed-in person's page, which fails the test on any script error or CSP
    violation it logs."""

    def __init__(self, context: BrowserContext, page: Page) -> None:
        self.context = context
        self.page = page
        self.problems: list[str] = []
        self.posts: list[str] = []
        page.on("console", self._logged)
        page.on("pageerror", lambda err: self.problems.append(str(err)))
        page.on("request", self._seen)

    def _logged(self, message: ConsoleMessage) -> None:
        # Chromium logs every 4xx; a refused decision is one the page handles.
        refused = "/decisions" in message.location.get("url", "")
        if message.type == "error" and not refused:
            self.problems.append(f"{message.text} ({message.location.get('url')})")

    def _seen(self, request: Request) -> None:
        if request.method == "POST":
            self.posts.append(request.url)

    async def close(self) -> None:
        await self.context.close()
        assert not self.problems, self.problems


@pytest.fixture
async def opened() -> AsyncIterator[list[Opened]]:
    """The pages a test opens, closed (and checked for errors) after it."""
    pages: list[Opened] = []
    yield pages
    for each in pages:
        await each.close()


async def open_inbox(
    browser: Browser,
    stack: Stack,
    pages: list[Opened],
    subject: str,
    groups: Sequence[str] = (),
    fragment: str = "",
    viewport: dict[str, int] | None = None,
) -> Page:
    context = await signed_in(browser, stack.url, subject, groups)
    page = await context.new_page()
    if viewport is not None:
        await page.set_viewport_size(viewport)  # type: ignore[arg-type]
    pages.append(Opened(context, page))
    await page.goto(f"{stack.url}/inbox{fragment}")
    await expect(page.locator("#who")).to_contain_text(f"Signed in as {subject}")
    return page


async def ask(stack: Stack, agent: str, text: str, **extra: Any) -> tuple[str, dict[str, Any]]:
    """Alice asks ``agent``; the thread and the one interrupt its run ended on."""
    thread_id = new_thread()
    events = await post_run(stack.http, agent, run_input(thread_id, "r1", text, **extra))
    [interrupt] = events[-1]["outcome"]["interrupts"]
    return thread_id, dict(interrupt)


def row(page: Page, thread_id: str) -> Any:
    return page.locator(f'li.item[data-thread="{thread_id}"]')


def detail(thread_id: str, interrupt: dict[str, Any]) -> str:
    return f"#/t/{thread_id}/i/{interrupt['id']}"


async def screenshot(page: Page, tmp_path: Path, name: str) -> None:
    """Always to the test's folder; to ``docs/`` too with ``AGUI_SCREENSHOTS=docs``."""
    await page.screenshot(path=tmp_path / name, full_page=True)
    if os.environ.get("AGUI_SCREENSHOTS") == "docs":
        await page.screenshot(path=DOCS / name, full_page=True)


async def payments_of(stack: Stack, thread_id: str) -> list[dict[str, Any]]:
    """The thread's payments once its turn went on after the deciding decision."""
    payments: list[dict[str, Any]] = []

    async def paid() -> bool:
        nonlocal payments
        thread = (await stack.http.get(f"/threads/{thread_id}")).json()
        payments = thread["state"].get("payments", [])
        return thread["status"] == "idle" and bool(payments)

    await eventually(paid, what="the payment")
    return payments


async def fits(page: Page) -> bool:
    """Nothing is wider than the window: no sideways scrolling."""
    return bool(await page.evaluate("document.documentElement.scrollWidth <= window.innerWidth"))


async def test_the_page_is_served_with_its_security_headers_and_nothing_else(
    stack: Stack, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    async with httpx.AsyncClient(base_url=stack.url) as anonymous:
        page = await anonymous.get("/inbox")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        csp = page.headers["content-security-policy"]
        assert "default-src 'self'" in csp and "frame-ancestors 'none'" in csp
        assert "script-src 'self'" in csp and "unsafe-eval" not in csp
        assert page.headers["x-content-type-options"] == "nosniff"
        assert page.headers["referrer-policy"] == "no-referrer"
        script = await anonymous.get("/inbox/static/app.js")
        assert script.status_code == 200
        assert script.headers["content-type"].startswith("text/javascript")
        assert (await anonymous.get("/inbox/vendor/jsoneditor.js")).status_code == 200
        for path in ("/inbox/vendor/package.json", "/inbox/static/nope.js", "/inbox/x"):
            assert (await anonymous.get(path)).status_code == 404, path

        monkeypatch.setitem(page_module.VENDOR, "jsoneditor.js", tmp_path / "missing.js")
        missing = await anonymous.get("/inbox")
        assert missing.status_code == 503 and "make install" in missing.text


async def test_a_finance_approver_edits_a_payment_within_policy_and_the_owner_sees_it(
    stack: Stack, browser: Browser, opened: list[Opened], tmp_path: Path
) -> None:
    thread_id, payment = await ask(stack, "payments", "pay 250 to ACME")
    own_id, _ = await ask(stack, "payments", "pay 50 to ACME")  # Alice's to approve
    alice = await open_inbox(browser, stack, opened, "alice", fragment="#/mine")
    await expect(row(alice, thread_id)).to_contain_text("Approvals 0 of 1")

    bob = await open_inbox(browser, stack, opened, "bob", FINANCE)
    await expect(row(bob, thread_id)).to_contain_text("Pay 250 to ACME?")
    # Who asked, and when (in the browser's locale: the year is in any of them).
    await expect(row(bob, thread_id)).to_contain_text(re.compile(r"Asked by alice at .*\d{4}"))
    # Bob sees exactly what he may decide: not Alice's small payment.
    async with httpx.AsyncClient(base_url=stack.url, headers=bearer("bob", FINANCE)) as http:
        listed = (await http.get("/interrupts", params={"role": "decide"})).json()
    decidable = {item["threadId"] for item in listed["interrupts"] if item["mayDecide"]}
    assert own_id not in decidable
    await expect(bob.locator("li.item")).to_have_count(len(decidable))
    await expect(row(bob, own_id)).to_have_count(0)
    await screenshot(bob, tmp_path, "inbox-list.png")

    await row(bob, thread_id).get_by_role("link").click()
    await expect(bob.locator(".conversation")).to_contain_text("pay 250 to ACME")
    await expect(bob.locator(".arguments")).to_contain_text("ACME")
    await bob.get_by_role("button", name="Edit arguments").click()
    amount = bob.locator('#edit-form [name="root[amount]"]')
    await amount.fill("300")
    await amount.press("Tab")
    await bob.get_by_role("button", name="Review changes").click()
    changed = bob.locator("#diff tbody tr")
    await expect(changed).to_have_count(1)
    await expect(changed).to_contain_text("amount")
    await expect(changed.locator("del")).to_have_text("250")
    await expect(changed.locator("ins")).to_have_text("300")
    await screenshot(bob, tmp_path, "inbox-edit.png")
    await bob.get_by_role("button", name="Approve with these changes").click()

    await expect(bob.get_by_role("status")).to_contain_text("Settled")
    await expect(bob.locator(".audit")).to_contain_text("bob approved")
    [paid] = await payments_of(stack, thread_id)
    assert (paid["amount"], paid["approvers"]) == (300, ["bob"])
    # The owner's own tab says what came of it, by itself.
    await expect(row(alice, thread_id)).to_contain_text("Approved by bob", timeout=SETTLE_SECONDS)
    await expect(row(alice, thread_id)).to_have_attribute("data-interrupt", payment["id"])


async def test_a_gateway_refusal_is_said_in_words_next_to_the_button(
    stack: Stack, browser: Browser, opened: list[Opened]
) -> None:
    thread_id, payment = await ask(stack, "payments", "pay 500 to ACME")
    bob = await open_inbox(browser, stack, opened, "bob", FINANCE, detail(thread_id, payment))
    await bob.get_by_role("button", name="Edit arguments").click()
    await bob.locator('#edit-form [name="root[amount]"]').fill("50000")
    await bob.get_by_role("button", name="Review changes").click()
    await bob.get_by_role("button", name="Approve with these changes").click()

    refusal = bob.locator("#review-panel > [role=alert]")
    await expect(refusal).to_have_text(
        "These changes need a stricter approval than this request has."
    )
    # Still open, and still decidable as proposed.
    await bob.get_by_role("button", name="Approve", exact=True).click()
    await expect(bob.get_by_role("status")).to_contain_text("Settled")


async def test_two_of_finance_approve_a_large_payment_from_two_browsers(
    stack: Stack, browser: Browser, opened: list[Opened]
) -> None:
    thread_id, payment = await ask(stack, "payments", "pay 20000 to ACME")
    bob = await open_inbox(browser, stack, opened, "bob", FINANCE, detail(thread_id, payment))
    carol = await open_inbox(browser, stack, opened, "carol", FINANCE)
    await expect(row(carol, thread_id)).to_contain_text("Approvals 0 of 2")

    await bob.get_by_role("button", name="Approve", exact=True).click()
    await expect(bob.get_by_role("status")).to_contain_text("1 of 2 approvals")
    # Carol's list shows Bob's approval without a reload.
    await expect(row(carol, thread_id)).to_contain_text("Approvals 1 of 2 (bob)")
    await row(carol, thread_id).get_by_role("link").click()
    await carol.get_by_role("button", name="Approve", exact=True).click()

    await expect(carol.get_by_role("status")).to_contain_text("Settled")
    await expect(carol.locator(".audit")).to_contain_text("bob approved")
    await expect(carol.locator(".audit")).to_contain_text("carol approved")
    [paid] = await payments_of(stack, thread_id)
    assert sorted(paid["approvers"]) == ["bob", "carol"]


async def test_an_invalid_answer_is_shown_as_an_error_and_nothing_is_sent(
    stack: Stack, browser: Browser, opened: list[Opened]
) -> None:
    thread_id, form = await ask(stack, "demo", "quarterly")
    page = await open_inbox(browser, stack, opened, "alice", fragment=detail(thread_id, form))
    await page.locator('#answer-form [name="root[quarter]"]').select_option("Q2")
    await page.locator('#answer-form [name="root[year]"]').fill("1999")
    await page.locator('#answer-form [name="root[revenue]"]').fill("1200.5")
    send = page.get_by_role("button", name="Send answer")
    await send.click()

    error = page.locator(".decide > [role=alert]")
    await expect(error).to_contain_text("Nothing was sent")
    await expect(error).to_contain_text("2000")
    assert not [url for url in opened[0].posts if url.endswith("/decisions")]

    await page.locator('#answer-form [name="root[year]"]').fill("2024")
    await page.locator('#answer-form [name="root[year]"]').press("Tab")
    await send.click()
    await expect(page.get_by_role("status")).to_contain_text("Settled")
    await expect(page.locator(".audit")).to_contain_text("alice answered")


async def test_a_request_that_expires_while_the_page_is_open_leaves_the_list(
    stack: Stack, browser: Browser, opened: list[Opened]
) -> None:
    thread_id, _ = await ask(stack, "demo", "quarterly", forwardedProps={"expiresInSeconds": 3})
    page = await open_inbox(browser, stack, opened, "alice")
    await expect(row(page, thread_id)).to_contain_text("expires in")

    await expect(row(page, thread_id)).to_have_count(0, timeout=SETTLE_SECONDS)


async def test_at_phone_width_by_keyboard(
    stack: Stack, browser: Browser, opened: list[Opened]
) -> None:
    thread_id, _ = await ask(stack, "payments", "pay 60 to " + "Averylongpayeename" * 4)
    page = await open_inbox(browser, stack, opened, "alice", viewport=PHONE)
    link = row(page, thread_id).get_by_role("link")
    await expect(link).to_be_visible()
    assert await fits(page)

    for _ in range(60):
        await page.keyboard.press("Tab")
        if await link.evaluate("element => element === document.activeElement"):
            break
    else:
        raise AssertionError("Tab never reached the request")
    await page.keyboard.press("Enter")

    await expect(page).to_have_url(re.compile(f"#/t/{thread_id}/i/"))
    await expect(page.get_by_role("button", name="Edit arguments")).to_be_visible()
    await page.get_by_role("button", name="Edit arguments").press("Enter")
    await expect(page.locator('#edit-form [name="root[payee]"]')).to_be_focused()
    assert await fits(page)
