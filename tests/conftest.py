"""Fixtures: for the session, one real Temporal dev server, worker and gateway, and a
headless Chromium; per test, a time-skipping test server, a local HTTP receiver, or a
local chat-completions server with an agent whose model it is."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator

import pytest
from playwright.async_api import Browser
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from activities.openai_chat import OpenAIModel
from activities.tooling import tool
from gateway.sent_messages import Resent, SentMessageCache
from settings import Settings
from tests.browser import chromium
from tests.chat_server import ChatServer
from tests.helpers import TEST_PAYLOAD_KEYS, TEST_SERVER, Stack, serve_stack, start_dev_server
from tests.receiver import Receiver
from worker import register_search_attributes
from workflows import search_attributes
from workflows.sdk.agent import AgentDefinition
from workflows.sdk.tools import Approval

# Every worker of the tests, in process or not (child processes inherit it), gives a
# thread's next workflow task to any worker when the one that caches the thread has not
# taken it within a second, not Temporal's ten: after a worker is killed, and after an
# update a thread's validator rejected, whose next task the dev server fails to put on
# the sticky queue ("should have a build ID directive on versioned sticky queue").
os.environ.setdefault("AGUI_WORKER_STICKY_QUEUE_SECONDS", "1")
# The suite runs as a deployment with encryption does (``codec.py``): every client,
# worker and gateway of the tests, and every process they start, encrypts payloads.
os.environ.setdefault("AGUI_PAYLOAD_KEYS", TEST_PAYLOAD_KEYS)


@pytest.fixture(scope="session")
async def temporal() -> AsyncIterator[WorkflowEnvironment]:
    """A Temporal dev server for the whole session (in memory)."""
    env = await start_dev_server()
    yield env
    await env.shutdown()


@pytest.fixture(scope="session")
def client(temporal: WorkflowEnvironment) -> Client:
    """A client of the session server, with the engine's data converter."""
    return temporal.client


@pytest.fixture(scope="session")
async def stack(client: Client) -> AsyncIterator[Stack]:
    """A worker and a gateway (real HTTP on loopback) on the session server."""
    async with serve_stack(client) as running:
        yield running


@pytest.fixture(scope="session")
async def browser() -> AsyncIterator[Browser]:
    """A headless Chromium for the session; each test opens contexts of its own."""
    async with chromium() as running:
        yield running


@pytest.fixture
def resent(monkeypatch: pytest.MonkeyPatch) -> list[Resent | None]:
    """What ``SentMessageCache.resent`` gave each run request the gateways read in the
    test, in order: whether the body was read after the thread's last snapshot."""
    given: list[Resent | None] = []
    read = SentMessageCache.resent

    def spied(cache: SentMessageCache, principal: str, body: bytes) -> Resent | None:
        given.append(read(cache, principal, body))
        return given[-1]

    monkeypatch.setattr(SentMessageCache, "resent", spied)
    return given


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    """A local HTTP endpoint that records what the engine posts to it."""
    with Receiver().serving() as serving:
        yield serving


@pytest.fixture
async def skipping() -> AsyncIterator[WorkflowEnvironment]:
    """A time-skipping test server per test: time skips only while no workflow task is
    outstanding, so one test's thread (say, a new workflow run left without a worker
    after a continue-as-new) must not hold the clock of the next."""
    env = await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=str(TEST_SERVER), data_converter=Settings().data_converter()
    )
    # The test server cannot list search attributes, so register them outright.
    await register_search_attributes(env.client, search_attributes.ALL)
    yield env
    await env.shutdown()


@tool(approval=Approval(edits=True))
async def weather(city: str) -> str:
    """Today's weather in ``city``."""
    return f"{city}: sunny"


@pytest.fixture
async def llm(client: Client) -> AsyncIterator[tuple[ChatServer, Stack]]:
    """A local chat-completions server, and a stack serving the agent ``llm`` whose
    ``OpenAIModel`` it is (with a ``weather`` tool that needs approval)."""
    with ChatServer().serving() as server:
        agent = AgentDefinition(
            name="llm",
            description="An OpenAI-compatible model with a gated weather tool.",
            model=OpenAIModel(
                name="llm", model="local-model", base_url=server.base_url, api_key="k"
            ),
            tools=[weather],
        )
        async with serve_stack(client, agents=[agent]) as stack:
            yield server, stack
