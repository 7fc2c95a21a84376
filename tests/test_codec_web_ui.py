"""The Temporal Web UI reads encrypted threads through the codec server, as ``make run``
sets it up: a real ``temporal server start-dev`` serving its UI with
``--ui-codec-endpoint`` at the gateway's ``/codec/token/<JWT>``, a real gateway and
worker encrypting with payload keys, and a real headless Chromium on the UI's pages."""

from __future__ import annotations

import base64
import uuid
from collections.abc import AsyncIterator

import pytest
from playwright.async_api import Browser, BrowserContext, Page, Response, Route, expect
from temporalio.client import Client

import codec
from gateway.streaming import thread_handle
from gateway.tokens import mint
from settings import Settings
from tests.helpers import (
    TEST_SECRET,
    free_port,
    gateway_client,
    new_thread,
    post_run,
    run_input,
    serve_gateway,
)
from tests.processes import DevServer
from worker import build_worker, ensure_search_attributes
from workflows.agents import EXAMPLES
from workflows.thread_ids import workflow_id_for

KEYS = f"ui1:{codec.new_key()}"
CODEC_GROUP = "agui-codec"
WORD = "quetzalcoatl"
"""A word of the conversation: the UI shows it only if it decoded the thread."""
SHOWN_MS = 15_000
"""How long (ms) the UI may take to load a workflow and decode its payloads."""


@pytest.fixture(scope="module")
async def ui(
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[tuple[DevServer, Client, str]]:
    """A dev server with its Web UI pointed at a gateway's codec server, as ``make run``
    points it (a token of the codec group in the path), and the gateway and a worker
    encrypting with :data:`KEYS`, with one thread whose conversation holds :data:`WORD`;
    yields the server, a client of it that encrypts, and the thread's id."""
    port = free_port()
    token = mint(TEST_SECRET, "temporal-web-ui", [CODEC_GROUP], settings=Settings())
    server = DevServer(
        tmp_path_factory.mktemp("ui") / "temporal.sqlite",
        ui_codec_endpoint=f"http://127.0.0.1:{port}/codec/token/{token}",
    )
    settings = Settings(
        task_queue=f"tq-{uuid.uuid4()}",
        auth_hs256_secret=TEST_SECRET,
        payload_keys=KEYS,
        codec_group=CODEC_GROUP,
        codec_origins=server.ui_url,
    )
    plain = await server.start()
    client = Client(
        plain.service_client, namespace=plain.namespace, data_converter=settings.data_converter()
    )
    try:
        await ensure_search_attributes(client)
        async with (
            build_worker(client, settings, EXAMPLES),
            serve_gateway(settings, client, port=port) as url,
            gateway_client(url) as http,
        ):
            thread_id = new_thread()
            await post_run(http, "demo", run_input(thread_id, "r1", f"mail a@example.com, {WORD}"))
            yield server, client, thread_id
    finally:
        await server.stop()


async def _workflow_page(
    browser: Browser, server: DevServer, thread_id: str, codec_reachable: bool
) -> tuple[BrowserContext, Page, list[Response]]:
    """The UI's page of the thread's workflow, and the codec server's answers to it
    (the context's: the UI may decode in a web worker, which a page's events miss)."""
    context = await browser.new_context()
    answers: list[Response] = []
    context.on("response", lambda r: answers.append(r) if "/codec/" in r.url else None)
    if not codec_reachable:

        async def refuse(route: Route) -> None:
            await route.abort()

        await context.route("**/codec/**", refuse)
    page = await context.new_page()
    await page.goto(f"{server.ui_url}/namespaces/default/workflows/{workflow_id_for(thread_id)}")
    return context, page, answers


async def test_the_web_ui_shows_an_encrypted_thread_decoded(
    ui: tuple[DevServer, Client, str], browser: Browser
) -> None:
    server, _, thread_id = ui
    context, page, answers = await _workflow_page(browser, server, thread_id, True)
    try:
        await expect(page.get_by_text(WORD).first).to_be_visible(timeout=SHOWN_MS)
    finally:
        await context.close()
    assert answers and all(answer.status == 200 for answer in answers)
    assert all("/codec/token/" in answer.url for answer in answers)


async def test_without_the_codec_server_the_web_ui_shows_only_ciphertext(
    ui: tuple[DevServer, Client, str], browser: Browser
) -> None:
    server, client, thread_id = ui
    # The current workflow run's input (the carried state, the conversation in it), as
    # Temporal holds it: the UI shows its data as base64 when it cannot decode it.
    history = await thread_handle(client, thread_id).fetch_history()
    (stored,) = history.events[0].workflow_execution_started_event_attributes.input.payloads
    assert stored.metadata["encoding"] == codec.ENCODING
    shown_raw = base64.b64encode(stored.data).decode()[:40]

    context, page, _ = await _workflow_page(browser, server, thread_id, False)
    try:
        await expect(page.get_by_text(shown_raw).first).to_be_visible(timeout=SHOWN_MS)
        assert WORD not in await page.inner_text("body")
    finally:
        await context.close()
