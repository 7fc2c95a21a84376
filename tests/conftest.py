"""Session-wide fixtures: one real Temporal dev server, one worker and one gateway."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from tests.helpers import Stack, serve_stack, start_dev_server


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
