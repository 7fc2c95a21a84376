"""Operators see and act on threads through Temporal: search attributes, current details,
and ``operator_resume`` (update, or signal from the Web UI / CLI) with an audit trail."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.client import Client, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError

from gateway.streaming import thread_handle
from settings import Settings
from tests.helpers import (
    Stack,
    bearer,
    eventually,
    new_thread,
    post_run,
    run_input,
    serve_stack,
    temporal_cli,
)
from workflows.models import OperatorResume
from workflows.thread import ThreadWorkflow
from workflows.thread_ids import workflow_id_for
from workflows.visibility import INTERRUPTS_MEMO

OPERATOR_RESUME = "operator_resume"


async def _ask(stack: Stack, text: str) -> tuple[str, list[dict[str, Any]]]:
    """A new thread whose first run asks what ``text`` calls for; its interrupts."""
    thread_id = new_thread()
    events = await post_run(stack.http, "demo", run_input(thread_id, "r1", text))
    interrupts: list[dict[str, Any]] = events[-1]["outcome"]["interrupts"]
    return thread_id, interrupts


async def _thread(stack: Stack, thread_id: str) -> dict[str, Any]:
    thread: dict[str, Any] = (await stack.http.get(f"/threads/{thread_id}")).json()
    return thread


def _approve(interrupt: dict[str, Any], approved: Any = True) -> dict[str, Any]:
    return {"interruptId": interrupt["id"], "status": "resolved", "payload": {"approved": approved}}


async def _approve_and_cancel(
    stack: Stack, thread_id: str, approval: dict[str, Any], form: dict[str, Any]
) -> None:
    """Resume the thread: approve the email, cancel the form."""
    resume = [_approve(approval), {"interruptId": form["id"], "status": "cancelled"}]
    body = {"threadId": thread_id, "runId": "r2", "messages": [], "resume": resume}
    await post_run(stack.http, "demo", body)


async def _listed(client: Client, query: str) -> set[str]:
    return {execution.id async for execution in client.list_workflows(query)}


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


async def test_threads_are_found_by_interrupt_reason_and_deadline(client: Client) -> None:
    # A task queue of its own: the query below must see only this test's threads.
    async with serve_stack(client) as stack:
        await _find_threads(client, stack)


async def _find_threads(client: Client, stack: Stack) -> None:
    mine = f'TaskQueue = "{stack.task_queue}"'
    approval_thread, (approval, form) = await _ask(stack, "mail a@example.com, quarterly")
    confirm_thread, (confirm,) = await _ask(stack, "confirm")
    now = datetime.now(UTC)
    # The example: waiting on a tool_call that expires within N days.
    tool_call_within = 'AguiInterruptReasons = "tool_call" AND AguiNextExpiry < "{}"'
    queries = {
        "within a day": tool_call_within.format(_iso(now + timedelta(days=1))),
        "within four days": tool_call_within.format(_iso(now + timedelta(days=4))),
        "confirmations": 'AguiInterruptReasons = "confirmation"',
        "by interrupt id": f'AguiInterruptIds = "{form["id"]}"',
        "waiting": 'AguiThreadStatus = "waiting"',
    }
    expected = {
        "within a day": set(),
        "within four days": {workflow_id_for(approval_thread)},
        "confirmations": {workflow_id_for(confirm_thread)},
        "by interrupt id": {workflow_id_for(approval_thread)},
        "waiting": {workflow_id_for(approval_thread), workflow_id_for(confirm_thread)},
    }

    async def all_listed() -> bool:
        found = await asyncio.gather(
            *(_listed(client, f"{mine} AND {q}") for q in queries.values())
        )
        return dict(zip(queries, found, strict=True)) == expected

    await eventually(all_listed, what="visibility to list the waiting threads")

    # The memo carries the open interrupts, as visibility lists return them.
    async for execution in client.list_workflows(
        f'{mine} AND WorkflowId = "{workflow_id_for(confirm_thread)}" '
        'AND ExecutionStatus = "Running"'
    ):
        assert (await execution.memo())[INTERRUPTS_MEMO] == [confirm]

    await _approve_and_cancel(stack, approval_thread, approval, form)

    async def only_confirm_waits() -> bool:
        waiting = await _listed(client, f'{mine} AND AguiThreadStatus = "waiting"')
        idle = await _listed(
            client, f'{mine} AND AguiThreadStatus = "idle" AND AguiNextExpiry IS NULL'
        )
        return waiting == {workflow_id_for(confirm_thread)} and idle == {
            workflow_id_for(approval_thread)
        }

    await eventually(only_confirm_waits, what="visibility to see the resumed thread idle")


async def _details(client: Client, thread_id: str) -> str:
    metadata = await thread_handle(client, thread_id).query(
        "__temporal_workflow_metadata", result_type=WorkflowMetadata
    )
    return metadata.current_details


async def test_current_details_say_what_the_thread_waits_for(client: Client, stack: Stack) -> None:
    thread_id, (approval, form) = await _ask(stack, "mail a@example.com, quarterly")
    deadline = datetime.fromisoformat(form["expiresAt"].replace("Z", "+00:00"))
    details = (
        "Waiting for approval: send_email(to='a@example.com', subject='Hi', "
        "body='mail a@example.com, quarterly')\n"
        "Waiting for input: Please provide the quarterly filing details., "
        f"expires {deadline:%Y-%m-%d %H:%M} UTC"
    )
    assert await _details(client, thread_id) == details
    # The runbook's terminal commands show the same.
    workflow_id = workflow_id_for(thread_id)
    metadata = await _cli(stack, "workflow", "metadata", "--workflow-id", workflow_id, "-o", "json")
    assert json.loads(metadata)["queryResult"][0]["currentDetails"] == details
    view = await _cli(
        stack, "workflow", "query", "--workflow-id", workflow_id, "--name", "view", "-o", "json"
    )
    # The CLI shows an empty list (e.g. of an interrupt's approvers' groups) as null.
    assert json.loads(view)["queryResult"][0]["interrupts"] == _empty_as_null([approval, form])
    await _approve_and_cancel(stack, thread_id, approval, form)
    assert await _details(client, thread_id) == "Idle: waiting for new input"


async def test_an_operator_resumes_by_update_and_the_client_sees_it(
    client: Client, stack: Stack
) -> None:
    thread_id, (approval,) = await _ask(stack, "mail a@example.com")
    handle = thread_handle(client, thread_id)
    request = OperatorResume.model_validate({"resume": [_approve(approval)], "operator": "alice"})

    result = await handle.execute_update(ThreadWorkflow.operator_resume, request)
    assert result.outcome == "applied"
    # The same resume again changes nothing (contract rule 5), but is audited.
    again = await handle.execute_update(ThreadWorkflow.operator_resume, request)
    assert (again.outcome, again.run_id) == ("repeated", result.run_id)

    thread = await _thread(stack, thread_id)
    assert thread["interrupts"] == []
    assert thread["state"]["outbox"] == [
        {"to": "a@example.com", "subject": "Hi", "body": "mail a@example.com"}
    ]
    assert [(r["runId"], r["status"]) for r in thread["runs"]] == [
        ("r1", "interrupted"),
        (result.run_id, "succeeded"),
    ]
    # The operator's approval bypasses the approvers and issues the call's permit.
    assert [(a["kind"], a["operator"], a["outcome"], a["runId"]) for a in thread["audit"]] == [
        ("operator_resume", "alice", "applied", result.run_id),
        ("permit", None, "applied", result.run_id),
        ("operator_resume", "alice", "repeated", result.run_id),
    ]
    assert thread["audit"][1]["approvers"] == ["operator:alice"]
    # The client's next run goes on from there: its snapshot has the operator's result.
    events = await post_run(
        stack.http, "demo", run_input(thread_id, "r3", "mail a@example.com", "thanks")
    )
    snapshot = next(e for e in events if e["type"] == "MESSAGES_SNAPSHOT")
    tool_results = [m for m in snapshot["messages"] if m["role"] == "tool"]
    assert json.loads(tool_results[0]["content"])["sent"] is True
    assert events[-1]["outcome"] == {"type": "success"}


@pytest.mark.parametrize(
    ("resume", "code"),
    [
        ([], "EMPTY_RESUME"),
        ([{"interruptId": "int-nope", "status": "cancelled"}], "UNKNOWN_INTERRUPT"),
        (None, "INVALID_PAYLOAD"),  # the approval with approved: "yes"
    ],
)
async def test_an_invalid_operator_resume_is_rejected_and_changes_nothing(
    client: Client, stack: Stack, resume: list[dict[str, Any]] | None, code: str
) -> None:
    thread_id, (approval,) = await _ask(stack, "mail a@example.com")
    before = await _thread(stack, thread_id)
    request = OperatorResume.model_validate(
        {"resume": [_approve(approval, "yes")] if resume is None else resume, "operator": "eve"}
    )
    with pytest.raises(WorkflowUpdateFailedError) as failed:
        await thread_handle(client, thread_id).execute_update(
            ThreadWorkflow.operator_resume, request
        )
    assert isinstance(failed.value.cause, ApplicationError)
    assert failed.value.cause.type == code
    assert await _thread(stack, thread_id) == before


def _empty_as_null(value: Any) -> Any:
    """``value`` as the ``temporal`` CLI prints JSON: an empty list as ``null``."""
    if isinstance(value, dict):
        return {key: _empty_as_null(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_empty_as_null(item) for item in value] or None
    return value


async def _cli(stack: Stack, *args: str) -> str:
    """Run the ``temporal`` CLI against the test server, as the runbook shows it: reading
    and writing payloads through the gateway's codec server, with an admin's token (with
    payload keys set, the server holds only ciphertext)."""
    assert stack.client is not None
    admin = bearer("operator", [Settings.model_fields["auth_admin_group"].default])
    code, out, err = await temporal_cli(
        stack.client,
        *args,
        "--codec-endpoint",
        f"{stack.url}/codec",
        "--codec-auth",
        admin["Authorization"],
    )
    assert code == 0, err
    return out


async def _operator_resume_cli(
    stack: Stack, command: str, workflow_id: str, request: dict[str, Any]
) -> str:
    """``temporal workflow <command> --workflow-id ... --name operator_resume --input ...``"""
    return await _cli(
        stack,
        "workflow",
        *command.split(),
        "--workflow-id",
        workflow_id,
        "--name",
        OPERATOR_RESUME,
        "--input",
        json.dumps(request),
    )


async def test_an_operator_resumes_by_cli_signal_or_update_with_an_audit_trail(
    client: Client, stack: Stack
) -> None:
    thread_id, (approval,) = await _ask(stack, "mail a@example.com")
    workflow_id = workflow_id_for(thread_id)

    # A bad signal cannot answer: it is audited as rejected and changes nothing.
    bad = {"resume": [_approve(approval, "yes")], "operator": "bob"}
    await _operator_resume_cli(stack, "signal", workflow_id, bad)

    async def audited(count: int) -> bool:
        return len((await _thread(stack, thread_id))["audit"]) == count

    await eventually(lambda: audited(1), what="the rejected signal in the audit trail")
    thread = await _thread(stack, thread_id)
    assert [i["id"] for i in thread["interrupts"]] == [approval["id"]]
    (rejected,) = thread["audit"]
    assert (rejected["operator"], rejected["outcome"], rejected["errorCode"]) == (
        "bob",
        "rejected",
        "INVALID_PAYLOAD",
    )

    good = {"resume": [_approve(approval)], "operator": "bob"}
    await _operator_resume_cli(stack, "signal", workflow_id, good)
    # The applied resume, and the permit of the email it approved.
    await eventually(lambda: audited(3), what="the applied signal in the audit trail")
    thread = await _thread(stack, thread_id)
    assert thread["interrupts"] == [] and len(thread["state"]["outbox"]) == 1
    assert [(a["kind"], a["outcome"]) for a in thread["audit"][1:]] == [
        ("operator_resume", "applied"),
        ("permit", "applied"),
    ]

    # The update form answers on the terminal; here a repeat, so nothing runs again.
    out = await _operator_resume_cli(stack, "update execute -o json", workflow_id, good)
    assert json.loads(out)["result"]["outcome"] == "repeated"
    assert len((await _thread(stack, thread_id))["state"]["outbox"]) == 1
