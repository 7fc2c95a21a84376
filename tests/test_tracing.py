"""One trace per AG-UI run: the gateway's span, the update, the workflow, its activities,
in one process and exported over OTLP from real worker and gateway processes."""

from __future__ import annotations

import pytest
from opentelemetry import trace
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from temporalio.client import Client
from temporalio.contrib.opentelemetry import create_tracer_provider

import tracing
from settings import Settings
from tests.helpers import eventually, new_thread, post_run, run_input, serve_stack
from tests.processes import engine
from tests.receiver import Receiver


@pytest.fixture(scope="module")
def spans() -> InMemorySpanExporter:
    """Every span this process finishes. The tracer provider is process-global and set
    once, as ``tracing.configure`` sets it in the worker and the gateway (with an OTLP
    exporter there)."""
    exporter = InMemorySpanExporter()
    provider = create_tracer_provider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    return exporter


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
        data_converter=Settings().data_converter(),
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
    # The thread's first run starts its workflow with the update; later runs are updates.
    common = {"AG-UI run", "ValidateUpdate:run_agent", "HandleUpdate:run_agent"}
    starts = {"StartUpdateWithStartWorkflow:ThreadWorkflow"}
    updates = {"StartWorkflowUpdate:run_agent"}
    first = {span.name for span in _trace_of(finished, "r1")}
    second = {span.name for span in _trace_of(finished, "r2")}
    assert common | starts <= first and "RunActivity:tool:send_email" not in first
    assert not updates & first
    tool = {"StartActivity:tool:send_email", "RunActivity:tool:send_email"}
    assert common | updates | tool <= second
    assert not starts & second
    (root,) = [s for s in _trace_of(finished, "r2") if s.name == "AG-UI run"]
    assert root.attributes == {
        "agui.agent": "demo",
        "agui.thread_id": thread_id,
        "agui.run_id": "r2",
    }


def _exported_spans(receiver: Receiver) -> list[tuple[str, str, bytes]]:
    """``(service, span name, trace id)`` of every span posted to the OTLP receiver."""
    spans = []
    for delivery in receiver.deliveries:
        if delivery.path != "/v1/traces":
            continue
        request = ExportTraceServiceRequest.FromString(delivery.body)
        for resource_spans in request.resource_spans:
            service = next(
                a.value.string_value
                for a in resource_spans.resource.attributes
                if a.key == "service.name"
            )
            for scope_spans in resource_spans.scope_spans:
                spans += [(service, span.name, span.trace_id) for span in scope_spans.spans]
    return spans


async def test_worker_and_gateway_processes_export_each_run_as_one_trace(
    client: Client, receiver: Receiver
) -> None:
    otlp = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.base_url, "OTEL_BSP_SCHEDULE_DELAY": "100"}
    async with engine(client.service_client.config.target_host, **otlp) as stack:
        stack.start_worker()
        gateway = await stack.start_gateway()
        thread_id = new_thread()
        events = await post_run(gateway.http, "demo", run_input(thread_id, "r1", "hello"))
        assert events[-1]["outcome"] == {"type": "success"}

        wanted = {
            ("agui-gateway", "AG-UI run"),
            ("agui-worker", "HandleUpdate:run_agent"),
            ("agui-worker", "RunActivity:model:demo"),
        }

        async def one_trace() -> bool:
            by_trace: dict[bytes, set[tuple[str, str]]] = {}
            for service, name, trace_id in _exported_spans(receiver):
                by_trace.setdefault(trace_id, set()).add((service, name))
            return any(wanted <= names for names in by_trace.values())

        await eventually(one_trace, what="the run's spans from both processes in one trace")
