"""Metrics move when interrupts move: the gateway's at ``GET /metrics``, the workflows'
through the worker's Temporal runtime (Prometheus)."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families
from temporalio.client import Client

from settings import Settings, telemetry_runtime
from tests.helpers import Stack, eventually, free_port, new_thread, post_run, run_input, serve_stack

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def _samples(text: str) -> Samples:
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def _value(samples: Samples, name: str, **labels: str) -> float:
    """The sum over ``name``'s series that have ``labels`` (among others)."""
    wanted = set(labels.items())
    return sum(v for (n, series), v in samples.items() if n == name and wanted <= series)


async def _scrape(http: httpx.AsyncClient, url: str) -> Samples:
    response = await http.get(url)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    return _samples(response.text)


async def test_the_gateways_metrics_count_requests_streams_runs_and_errors(stack: Stack) -> None:
    before = await _scrape(stack.http, "/metrics")
    thread_id = new_thread()
    events = await post_run(stack.http, "demo", run_input(thread_id, "r1", "mail a@example.com"))
    (approval,) = events[-1]["outcome"]["interrupts"]
    resume = {"threadId": thread_id, "runId": "r2", "messages": []}
    bad = {"interruptId": approval["id"], "status": "resolved", "payload": {"approved": "yes"}}
    await post_run(stack.http, "demo", resume | {"resume": [bad]})
    good = bad | {"payload": {"approved": True}}
    await post_run(stack.http, "demo", resume | {"resume": [good]})
    after = await _scrape(stack.http, "/metrics")

    def moved(name: str, **labels: str) -> float:
        return _value(after, name, **labels) - _value(before, name, **labels)

    route = "/agents/{agent_id}"
    requests = "agui_gateway_requests_total"
    assert moved(requests, method="POST", route=route, status="200") == 3
    assert moved(requests, method="GET", route="/metrics", status="200") == 1
    assert moved("agui_gateway_stream_seconds_count", route=route) == 3
    assert moved("agui_gateway_runs_total", agent="demo", outcome="interrupt") == 1
    assert moved("agui_gateway_runs_total", agent="demo", outcome="success") == 1
    assert moved("agui_gateway_runs_total", agent="demo", outcome="error") == 1
    assert moved("agui_gateway_run_errors_total", code="INVALID_PAYLOAD") == 1


async def test_the_workflows_count_interrupts_opened_resolved_cancelled_and_expired(
    client: Client,
) -> None:
    port = free_port()
    metered = await Client.connect(
        client.service_client.config.target_host,
        namespace=client.namespace,
        data_converter=Settings().data_converter(),
        runtime=telemetry_runtime(f"127.0.0.1:{port}"),
    )
    url = f"http://127.0.0.1:{port}/metrics"
    async with serve_stack(metered) as stack, httpx.AsyncClient() as scraper:
        thread_id = new_thread()
        events = await post_run(
            stack.http, "demo", run_input(thread_id, "r1", "mail a@example.com, quarterly")
        )
        approval, form = events[-1]["outcome"]["interrupts"]
        resume = [
            {"interruptId": approval["id"], "status": "resolved", "payload": {"approved": True}},
            {"interruptId": form["id"], "status": "cancelled"},
        ]
        body = {"threadId": thread_id, "runId": "r2", "messages": [], "resume": resume}
        await post_run(stack.http, "demo", body)
        expiring = new_thread()
        await post_run(
            stack.http,
            "demo",
            run_input(expiring, "r1", "quarterly", forwardedProps={"expiresInSeconds": 1}),
        )

        opened = "agui_interrupts_opened_total"
        closed = "agui_interrupts_closed_total"
        expected = {
            (opened, "tool_call", None): 1,
            (opened, "input_required", None): 2,
            (closed, "tool_call", "resolved"): 1,
            (closed, "input_required", "cancelled"): 1,
            (closed, "input_required", "expired"): 1,
        }

        async def counted() -> bool:
            samples = await _scrape(scraper, url)
            return all(
                _value(
                    samples,
                    name,
                    agent="demo",
                    reason=reason,
                    **({"status": status} if status else {}),
                )
                == count
                for (name, reason, status), count in expected.items()
            )

        await eventually(counted, what="the interrupt counters (the form expires after 1 s)")
        # The same runtime exports the SDK's own metrics.
        samples = await _scrape(scraper, url)
        assert any(name.startswith("temporal_workflow_task") for name, _ in samples)
