"""The embedded server keeps the search attributes' definitions in memory, the worker
starts only once the server takes the ones it registered (``settings.py``,
``EMBEDDED_DYNAMIC_CONFIG``; ``worker.ensure_search_attributes``), and a gateway in front
of a namespace without them says Temporal is not ready."""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta

import httpx
import pytest_asyncio
from temporalio import workflow
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from settings import Settings, embedded_server_flags
from tests.helpers import (
    TEMPORAL_CLI,
    TEST_SECRET,
    free_port,
    gateway_client,
    new_thread,
    run_input,
    serve_gateway,
)
from worker import ensure_search_attributes
from workflows import search_attributes


@workflow.defn(sandboxed=False)
class SetsEveryAttribute:
    """Sets each of the engine's search attributes, as a thread's runs do."""

    @workflow.run
    async def run(self) -> None:
        now = workflow.now()
        workflow.upsert_search_attributes(
            [
                search_attributes.AGENT.value_set("demo"),
                search_attributes.OWNER.value_set("u:alice"),
                search_attributes.THREAD_STATUS.value_set("waiting"),
                search_attributes.LAST_ACTIVITY.value_set(now),
                search_attributes.INTERRUPT_IDS.value_set(["i1"]),
                search_attributes.INTERRUPT_REASONS.value_set(["tool_call"]),
                search_attributes.NEXT_EXPIRY.value_set(now),
                search_attributes.APPROVERS.value_set(["u:bob"]),
            ]
        )


class Server:
    """A fresh embedded server with ``make run``'s dynamic config, and its metrics."""

    def __init__(self, env: WorkflowEnvironment, metrics_url: str) -> None:
        self.client: Client = env.client
        self.metrics_url = metrics_url

    async def metadata_reads(self) -> float:
        """How often the server has read search attributes' definitions from its store."""
        async with httpx.AsyncClient() as http:
            text = (await http.get(self.metrics_url)).text
        pattern = (
            r'^persistence_latency_count\{[^}]*operation="GetCurrentClusterMetadata"[^}]*\} (\S+)$'
        )
        return sum(float(value) for value in re.findall(pattern, text, re.MULTILINE))


@pytest_asyncio.fixture
async def server() -> AsyncIterator[Server]:
    port = free_port()
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=str(TEMPORAL_CLI),
        dev_server_log_level="error",
        data_converter=Settings().data_converter(),
        dev_server_extra_args=[*embedded_server_flags(on_file=False), "--metrics-port", str(port)],
    )
    try:
        yield Server(env, f"http://127.0.0.1:{port}/metrics")
    finally:
        await env.shutdown()


async def test_a_workflow_sets_the_attributes_the_worker_has_just_registered(
    server: Server,
) -> None:
    """Registered on a fresh server, the attributes are usable as soon as
    ``ensure_search_attributes`` returns: the first workflow task that sets them does
    not fail (it would, and be retried seconds later, if the worker started polling
    before the server's services had read the registration)."""
    await ensure_search_attributes(server.client)
    async with Worker(server.client, task_queue="attributes", workflows=[SetsEveryAttribute]):
        handle = await server.client.start_workflow(
            SetsEveryAttribute.run,
            id=f"attributes-{uuid.uuid4()}",
            task_queue="attributes",
            execution_timeout=timedelta(seconds=30),
        )
        await handle.result()
    events = [event.event_type async for event in handle.fetch_history_events()]
    assert EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED not in events
    described = await handle.describe()
    assert described.typed_search_attributes.get(search_attributes.APPROVERS) == ["u:bob"]


async def test_setting_attributes_reads_no_definitions_from_the_store(server: Server) -> None:
    """Each workflow that sets the attributes is checked against definitions the server
    keeps in memory: the dev server's default would read them from its store each time."""
    await ensure_search_attributes(server.client)
    async with Worker(server.client, task_queue="attributes", workflows=[SetsEveryAttribute]):
        await server.client.execute_workflow(
            SetsEveryAttribute.run, id=f"warm-{uuid.uuid4()}", task_queue="attributes"
        )
        before = await server.metadata_reads()
        for _ in range(20):
            await server.client.execute_workflow(
                SetsEveryAttribute.run, id=f"attributes-{uuid.uuid4()}", task_queue="attributes"
            )
        after = await server.metadata_reads()
    # The definitions' own refresh (once a minute) may fall in the window.
    assert after - before <= 2


async def test_a_namespace_without_the_attributes_is_unavailable_not_the_clients_fault(
    server: Server,
) -> None:
    """Before a worker has registered the engine's search attributes, Temporal refuses a
    new thread (its start sets them) and a listing (its query names them) with
    ``INVALID_ARGUMENT``, as it refuses an input too large: the gateway answers 503
    ``TEMPORAL_UNAVAILABLE``, to retry, not 413 or 500, and without Temporal's text."""
    settings = Settings(task_queue="attributes", auth_hs256_secret=TEST_SECRET)
    async with serve_gateway(settings, server.client) as url, gateway_client(url) as http:
        run = await http.post("/agents/demo", json=run_input(new_thread(), "r1", "hello"))
        listing = await http.get("/interrupts")
    for response in (run, listing):
        assert response.status_code == 503, response.text
        assert response.headers["retry-after"]
        error = response.json()["error"]
        assert error["code"] == "TEMPORAL_UNAVAILABLE"
        assert "search attributes" in error["message"]
        assert "Agui" not in error["message"] and "mapping" not in error["message"]
