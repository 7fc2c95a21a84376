"""The AG-UI interrupt lifecycle end to end: every reason, every contract rule."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from typing import Any

import pytest
from temporalio.client import Client

from tests.helpers import (
    Stack,
    eventually,
    history_length,
    new_thread,
    post_run,
    run_input,
    serve_stack,
    types,
)
from workflows.errors import ErrorCode
from workflows.sdk import AgentContext, AgentDefinition, ChatReply, ScriptedModel


async def thread_of(stack: Stack, thread_id: str) -> dict[str, Any]:
    response = await stack.http.get(f"/threads/{thread_id}")
    assert response.status_code == 200
    body: dict[str, Any] = response.json()
    return body


async def interrupted(stack: Stack, thread_id: str, text: str, **extra: Any) -> list[dict]:
    """Run ``text`` and return the interrupts the run ended on."""
    events = await post_run(stack.http, "demo", run_input(thread_id, "r1", text, **extra))
    finished = events[-1]
    assert finished["type"] == "RUN_FINISHED"
    assert finished["outcome"]["type"] == "interrupt"
    # State at the boundary: both snapshots right before RUN_FINISHED.
    assert types(events)[-3:] == ["STATE_SNAPSHOT", "MESSAGES_SNAPSHOT", "RUN_FINISHED"]
    interrupts: list[dict] = finished["outcome"]["interrupts"]
    return interrupts


async def resume(
    stack: Stack, thread_id: str, entries: list[dict[str, Any]], run_id: str = "r2"
) -> list[dict[str, Any]]:
    body = {"threadId": thread_id, "runId": run_id, "messages": [], "resume": entries}
    return await post_run(stack.http, "demo", body)


def approve(interrupt: dict, **payload: Any) -> dict[str, Any]:
    return approve_value(interrupt, payload)


def approve_value(interrupt: dict, payload: Any) -> dict[str, Any]:
    return {"interruptId": interrupt["id"], "status": "resolved", "payload": payload}


def filing(form: dict, quarter: str) -> dict[str, Any]:
    """A quarterly-filing answer (``quarter`` may be invalid on purpose)."""
    return approve(form, quarter=quarter, year=2026, revenue=1)


def cancel(interrupt: dict) -> dict[str, Any]:
    return {"interruptId": interrupt["id"], "status": "cancelled"}


async def test_a_tool_call_is_approved_across_two_runs(stack: Stack) -> None:
    thread_id = new_thread()
    events = await post_run(stack.http, "demo", run_input(thread_id, "r1", "please mail a@b.com"))
    assert types(events) == [
        "RUN_STARTED",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "STATE_SNAPSHOT",
        "MESSAGES_SNAPSHOT",
        "RUN_FINISHED",
    ]
    call_id = events[1]["toolCallId"]
    assert events[1]["toolCallName"] == "send_email"
    assert json.loads(events[2]["delta"]) == {
        "to": "a@b.com",
        "subject": "Hi",
        "body": "please mail a@b.com",
    }
    [interrupt] = events[-1]["outcome"]["interrupts"]
    assert interrupt["reason"] == "tool_call"
    assert interrupt["toolCallId"] == call_id
    assert interrupt["responseSchema"]["required"] == ["approved"]
    assert "editedArgs" in interrupt["responseSchema"]["properties"]
    waiting = await thread_of(stack, thread_id)
    assert waiting["status"] == "waiting"
    assert waiting["interrupts"] == [interrupt]

    events = await resume(stack, thread_id, [approve(interrupt, approved=True)])

    assert "TOOL_CALL_START" not in types(events)
    result = next(e for e in events if e["type"] == "TOOL_CALL_RESULT")
    assert result["toolCallId"] == call_id
    assert json.loads(result["content"])["sent"] is True
    assert events[-1]["outcome"] == {"type": "success"}
    thread = await thread_of(stack, thread_id)
    assert thread["interrupts"] == []
    assert thread["status"] == "idle"
    assert thread["state"]["outbox"] == [
        {"to": "a@b.com", "subject": "Hi", "body": "please mail a@b.com"}
    ]


async def test_approve_with_edits_replaces_the_arguments(stack: Stack) -> None:
    thread_id = new_thread()
    [interrupt] = await interrupted(stack, thread_id, "mail a@b.com")
    edited = {"to": "c@d.com", "subject": "Hello", "body": "Revised"}

    await resume(stack, thread_id, [approve(interrupt, approved=True, editedArgs=edited)])

    assert (await thread_of(stack, thread_id))["state"]["outbox"] == [edited]


@pytest.mark.parametrize("answer", ["deny", "cancel"])
async def test_a_denied_or_cancelled_tool_call_does_not_run(stack: Stack, answer: str) -> None:
    thread_id = new_thread()
    [interrupt] = await interrupted(stack, thread_id, "mail a@b.com")
    entry = approve(interrupt, approved=False) if answer == "deny" else cancel(interrupt)

    events = await resume(stack, thread_id, [entry])

    result = next(e for e in events if e["type"] == "TOOL_CALL_RESULT")
    assert json.loads(result["content"]) == {
        "sent": False,
        "reason": "denied" if answer == "deny" else "cancelled",
    }
    assert events[-1]["outcome"] == {"type": "success"}
    assert "outbox" not in (await thread_of(stack, thread_id))["state"]


async def test_parallel_interrupts_approve_two_and_cancel_one(stack: Stack) -> None:
    thread_id = new_thread()
    interrupts = await interrupted(stack, thread_id, "mail x@y.com, y@z.com and z@w.com")
    assert [i["reason"] for i in interrupts] == ["tool_call"] * 3
    first, second, third = interrupts

    events = await resume(
        stack,
        thread_id,
        [approve(first, approved=True), approve(second, approved=True), cancel(third)],
    )

    results = {
        e["toolCallId"]: json.loads(e["content"]) for e in events if e["type"] == "TOOL_CALL_RESULT"
    }
    assert results[first["toolCallId"]]["sent"] is True
    assert results[second["toolCallId"]]["sent"] is True
    assert results[third["toolCallId"]] == {"sent": False, "reason": "cancelled"}
    outbox = (await thread_of(stack, thread_id))["state"]["outbox"]
    assert [mail["to"] for mail in outbox] == ["x@y.com", "y@z.com"]


async def test_every_core_and_custom_reason_in_one_run(stack: Stack) -> None:
    thread_id = new_thread()
    interrupts = await interrupted(
        stack, thread_id, "quarterly numbers, please confirm, policy applies"
    )
    form, yes_no, hold = interrupts
    assert form["reason"] == "input_required"
    assert form["responseSchema"]["required"] == ["quarter", "year", "revenue"]
    assert form["expiresAt"].endswith("Z")
    assert yes_no["reason"] == "confirmation"
    assert yes_no["responseSchema"] == {"type": "boolean"}
    assert hold["reason"] == "demo:policy_hold"
    assert hold["message"] and "responseSchema" not in hold

    events = await resume(
        stack,
        thread_id,
        [
            {
                "interruptId": form["id"],
                "status": "resolved",
                "payload": {"quarter": "Q1", "year": 2026, "revenue": 4200000},
            },
            {"interruptId": yes_no["id"], "status": "resolved", "payload": True},
            {"interruptId": hold["id"], "status": "resolved"},
        ],
    )

    reply = "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert "Filed Q1 2026 with revenue 4200000" in reply
    assert "Confirmed." in reply
    assert "Policy hold released." in reply
    state = (await thread_of(stack, thread_id))["state"]
    assert state["filings"] == [{"quarter": "Q1", "year": 2026, "revenue": 4200000}]


def _bad_resumes(interrupts: list[dict]) -> list[tuple[str, Any]]:
    first, second = interrupts
    ok = approve(first, approved=True)
    return [
        (ErrorCode.INTERRUPTS_PENDING, None),
        (ErrorCode.UNKNOWN_INTERRUPT, [ok, {**ok, "interruptId": "int-forged"}]),
        (ErrorCode.INCOMPLETE_RESUME, [ok]),
        (ErrorCode.DUPLICATE_RESUME_ENTRY, [ok, ok]),
        (ErrorCode.INVALID_PAYLOAD, [ok, approve(second, approved="yes")]),
        (ErrorCode.MISSING_PAYLOAD, [ok, {"interruptId": second["id"], "status": "resolved"}]),
        (
            ErrorCode.INVALID_PAYLOAD,
            [ok, approve(second, approved=True, editedArgs={"to": "not-an-address"})],
        ),
    ]


async def test_every_contract_violation_is_a_run_error_that_changes_nothing(
    stack: Stack,
) -> None:
    assert stack.client is not None
    thread_id = new_thread()
    interrupts = await interrupted(stack, thread_id, "mail a@b.com and c@d.com")
    before = await thread_of(stack, thread_id)
    history_before = await history_length(stack.client, thread_id)

    for index, (code, entries) in enumerate(_bad_resumes(interrupts)):
        body: dict[str, Any] = run_input(thread_id, f"bad-{index}", "hello again")
        if entries is not None:
            body["resume"] = entries
        events = await post_run(stack.http, "demo", body)
        assert types(events) == ["RUN_STARTED", "RUN_ERROR"], code
        assert events[1]["code"] == code
        assert events[1]["message"]
        assert await thread_of(stack, thread_id) == before
        assert await history_length(stack.client, thread_id) == history_before

    # Still open exactly as they were: a valid resume goes through.
    events = await resume(stack, thread_id, [approve(i, approved=True) for i in interrupts])
    assert events[-1]["outcome"] == {"type": "success"}


async def test_an_invalid_payload_error_names_the_failing_path(stack: Stack) -> None:
    thread_id = new_thread()
    [form] = await interrupted(stack, thread_id, "quarterly")
    events = await resume(
        stack,
        thread_id,
        [filing(form, "Q5")],
    )
    assert events[-1]["code"] == ErrorCode.INVALID_PAYLOAD
    assert "payload/quarter" in events[-1]["message"]


async def test_a_replayed_resume_runs_nothing_twice_and_gets_the_same_outcome(
    stack: Stack,
) -> None:
    thread_id = new_thread()
    [interrupt] = await interrupted(stack, thread_id, "mail a@b.com")
    entries = [approve(interrupt, approved=True)]

    first = await resume(stack, thread_id, entries, run_id="r2")
    again = await resume(stack, thread_id, entries, run_id="r3")

    assert again[0]["runId"] == again[-1]["runId"] == "r3"
    strip = [{k: v for k, v in e.items() if k != "runId"} for e in first]
    assert [{k: v for k, v in e.items() if k != "runId"} for e in again] == strip
    thread = await thread_of(stack, thread_id)
    assert len(thread["state"]["outbox"]) == 1
    assert [run["runId"] for run in thread["runs"]] == ["r1", "r2"]


async def test_concurrent_duplicate_resumes_send_once(stack: Stack) -> None:
    thread_id = new_thread()
    [interrupt] = await interrupted(stack, thread_id, "mail a@b.com")
    entries = [approve(interrupt, approved=True)]

    results = await asyncio.gather(
        *(resume(stack, thread_id, entries, run_id=f"dup-{i}") for i in range(3))
    )

    assert all(events[-1]["outcome"] == {"type": "success"} for events in results)
    assert len((await thread_of(stack, thread_id))["state"]["outbox"]) == 1


async def test_a_resume_may_reuse_the_interrupted_runs_id(stack: Stack) -> None:
    thread_id = new_thread()
    [interrupt] = await interrupted(stack, thread_id, "mail a@b.com")

    events = await resume(stack, thread_id, [approve(interrupt, approved=True)], run_id="r1")

    assert events[0]["runId"] == "r1"
    assert events[-1]["outcome"] == {"type": "success"}
    assert len((await thread_of(stack, thread_id))["runs"]) == 2


async def test_an_expired_interrupt_closes_by_itself_and_rejects_late_answers(
    stack: Stack,
) -> None:
    thread_id = new_thread()
    [form] = await interrupted(
        stack, thread_id, "quarterly", forwardedProps={"expiresInSeconds": 1}
    )

    # Nobody is connected: the durable timer closes it and the agent carries on.
    async def closed() -> bool:
        return (await thread_of(stack, thread_id))["interrupts"] == []

    await eventually(closed, what="the interrupt to expire")
    thread = await thread_of(stack, thread_id)
    assert thread["status"] == "idle"
    assert thread["messages"][-1]["content"] == "Quarterly filing: expired, nothing filed."
    assert thread["runs"][-1]["runId"].startswith("expiry-")

    late = await resume(
        stack,
        thread_id,
        [filing(form, "Q1")],
    )
    assert late[-1]["code"] == ErrorCode.INTERRUPT_EXPIRED
    # The official client answers an expired interrupt with a cancel: accepted.
    events = await resume(stack, thread_id, [cancel(form)], run_id="r3")
    assert events[-1]["outcome"] == {"type": "success"}
    # And the thread takes new input again.
    events = await post_run(stack.http, "demo", run_input(thread_id, "r4", "quarterly", "hello"))
    assert events[-1]["outcome"] == {"type": "success"}


async def hurry(ctx: AgentContext) -> None:
    """Ask a question that expires a millisecond after it is asked."""
    await ctx.interrupt(
        "confirmation", message="Quick?", response=bool, expires=timedelta(milliseconds=1)
    )


HURRIED = AgentDefinition(
    name="hurried",
    description="Asks a question nobody can answer in time.",
    model=ScriptedModel("hurried", lambda request: ChatReply(text="unused")),
    turn=hurry,
)


async def test_a_resolved_answer_after_expiry_but_before_the_timer_is_rejected(
    client: Client,
) -> None:
    # The demo's forms live at least a second; this agent's question, a millisecond.
    async with serve_stack(client, agents=[HURRIED]) as stack:
        thread_id = new_thread()
        events = await post_run(stack.http, "hurried", run_input(thread_id, "r1", "go"))
        [question] = events[-1]["outcome"]["interrupts"]
        body = {
            "threadId": thread_id,
            "runId": "r2",
            "messages": [],
            "resume": [approve_value(question, True)],
        }
        events = await post_run(stack.http, "hurried", body)
    assert events[-1]["code"] == ErrorCode.INTERRUPT_EXPIRED


async def test_a_draft_shaped_resume_is_understood_as_one_resolved_entry(stack: Stack) -> None:
    thread_id = new_thread()
    [interrupt] = await interrupted(stack, thread_id, "mail a@b.com")
    body = {
        "threadId": thread_id,
        "runId": "r2",
        "messages": [],
        "resume": {"interruptId": interrupt["id"], "payload": {"approved": True}},
    }

    events = await post_run(stack.http, "demo", body)

    assert events[-1]["outcome"] == {"type": "success"}
    assert len((await thread_of(stack, thread_id))["state"]["outbox"]) == 1


async def test_draft_clients_can_opt_in_to_the_draft_output_shape(stack: Stack) -> None:
    thread_id = new_thread()
    body = run_input(thread_id, "r1", "mail a@b.com and c@d.com")
    async with stack.http.stream("POST", "/agents/demo?compat=draft", json=body) as response:
        lines = [line async for line in response.aiter_lines() if line.startswith("data: ")]
    finished = json.loads(lines[-1].removeprefix("data: "))

    assert finished["outcome"] == "interrupt"
    first, second = finished["interrupts"]
    assert finished["interrupt"]["id"] == first["id"]
    assert finished["interrupt"]["reason"] == "tool_call"
    assert finished["interrupt"]["payload"]["toolCallId"] == first["toolCallId"]
