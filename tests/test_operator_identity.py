"""An operator's resume is audited with the identity Temporal recorded for its sender,
beside the name the operator typed, whether it came as an update or as a signal."""

from __future__ import annotations

from typing import Any

from temporalio.client import Client

from gateway.streaming import thread_handle
from settings import Settings
from tests.helpers import Stack, eventually, new_thread, post_run, run_input
from workflows.models import OperatorResume
from workflows.thread import ThreadWorkflow

CONSOLE = "ops-console:erin@example.com"


async def _console(client: Client) -> Client:
    """A client of the test server that says it is the operators' console."""
    return await Client.connect(
        client.service_client.config.target_host,
        namespace=client.namespace,
        data_converter=Settings().data_converter(),
        identity=CONSOLE,
    )


async def _approval(stack: Stack) -> tuple[str, dict[str, Any]]:
    thread_id = new_thread()
    events = await post_run(stack.http, "demo", run_input(thread_id, "r1", "mail a@example.com"))
    (approval,) = events[-1]["outcome"]["interrupts"]
    return thread_id, approval


def _resume(approval: dict[str, Any], approved: Any = True) -> OperatorResume:
    entry = {"interruptId": approval["id"], "status": "resolved", "payload": {"approved": approved}}
    return OperatorResume.model_validate({"resume": [entry], "operator": "erin"})


async def _audit(stack: Stack, thread_id: str) -> list[dict[str, Any]]:
    response = await stack.http.get(f"/threads/{thread_id}")
    assert response.status_code == 200, response.text
    audit: list[dict[str, Any]] = response.json()["audit"]
    return audit


async def test_an_update_is_audited_with_its_senders_identity(client: Client, stack: Stack) -> None:
    console = await _console(client)
    thread_id, approval = await _approval(stack)
    handle = thread_handle(console, thread_id)

    result = await handle.execute_update(ThreadWorkflow.operator_resume, _resume(approval))
    assert result.outcome == "applied"
    # The update answers once its audit record is complete.
    resumed = [r for r in await _audit(stack, thread_id) if r["kind"] == "operator_resume"]
    assert [(r["operator"], r["identity"], r["outcome"]) for r in resumed] == [
        ("erin", CONSOLE, "applied")
    ]


async def test_signals_are_audited_each_with_its_own_senders_identity(
    client: Client, stack: Stack
) -> None:
    console = await _console(client)
    thread_id, approval = await _approval(stack)
    # First a rejected signal from another client (the suite's own identity), then the
    # console's: each record must name the sender of its own signal.
    await thread_handle(client, thread_id).signal(
        ThreadWorkflow.operator_resume_signal, _resume(approval, "yes")
    )
    await thread_handle(console, thread_id).signal(
        ThreadWorkflow.operator_resume_signal, _resume(approval)
    )

    async def both_identified() -> bool:
        records = [r for r in await _audit(stack, thread_id) if r["kind"] == "operator_resume"]
        return len(records) == 2 and all(r.get("identity") for r in records)

    await eventually(both_identified, what="both signals audited with their senders")
    rejected, applied = [
        r for r in await _audit(stack, thread_id) if r["kind"] == "operator_resume"
    ]
    assert (rejected["outcome"], rejected["identity"]) == ("rejected", client.identity)
    assert (applied["outcome"], applied["operator"], applied["identity"]) == (
        "applied",
        "erin",
        CONSOLE,
    )
    assert client.identity != CONSOLE
