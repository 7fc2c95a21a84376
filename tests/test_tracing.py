"""One trace per AG-UI run: the gateway's span, the update, the workflow, its activities."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from temporalio.client import Client
from temporalio.contrib.opentelemetry import create_tracer_provider
from temporalio.contrib.pydantic import pydantic_data_converter

import tracing
from tests.helpers import new_thread, post_run, run_input, serve_stack


@pytest.fixture(scope="module")
def spans() -> Iterator[InMemorySpanExporter]:
    """Every span this process finishes. The tracer provider is process-global and set
    once, as ``tracing.configure`` sets it in the worker and the gateway (with an OTLP
    exporter there)."""
    exporter = InMemorySpanExporter()
    provider = create_tracer_provider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    yield exporter
    provider.shutdown()


def _trace_of(finished: tuple[ReadableSpan, ...], run_id: str) -> list[ReadableSpan]:
    (root,) = [
        s
        for s in finished
        if s.name == "AG-UI run" and (s.attributes or {}).get("agui.run_id") == run_id
    ]
    assert root.context is not None
    return [s for s in finished if s.context and s.context.trace_id == root.context.trace_id]


async def test_a_run_is_one_trace_from_gateway_to_activity(
    client: Client, spans: InMemorySpanExporter
) -> None:
    traced = await Client.connect(
        client.service_client.config.target_host,
        namespace=client.namespace,
        data_converter=pydantic_data_converter,
        plugins=[tracing.plugin()],
    )
    thread_id = new_thread()
    async with serve_stack(traced) as stack:
        first = run_input(thread_id, "r1", "mail a@example.com")
        (approval,) = (await post_run(stack.http, "demo", first))[-1]["outcome"]["interrupts"]
        answer = {"approved": True}
        resume = [{"interruptId": approval["id"], "status": "resolved", "payload": answer}]
        body = {"threadId": thread_id, "runId": "r2", "messages": [], "resume": resume}
        await post_run(stack.http, "demo", body)

    finished = spans.get_finished_spans()
    # Each run is a trace of its own: the gateway's span, the update with its
    # validation and handling in the workflow, and (for the approval) the email tool.
    common = {
        "AG-UI run",
        "StartUpdateWithStartWorkflow:ThreadWorkflow",
        "ValidateUpdate:run_agent",
        "HandleUpdate:run_agent",
    }
    first = {span.name for span in _trace_of(finished, "r1")}
    second = {span.name for span in _trace_of(finished, "r2")}
    assert common <= first and "RunActivity:send_email" not in first
    assert common | {"StartActivity:send_email", "RunActivity:send_email"} <= second
    (root,) = [s for s in _trace_of(finished, "r2") if s.name == "AG-UI run"]
    assert root.attributes == {
        "agui.agent": "demo",
        "agui.thread_id": thread_id,
        "agui.run_id": "r2",
    }
