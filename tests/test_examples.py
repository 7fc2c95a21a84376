"""The SDK's example agents end to end: real gateway, worker and Temporal server."""

from __future__ import annotations

import json
from typing import Any

from tests.helpers import Stack, assert_valid_stream, new_thread, post_run, run_input, types
from workflows.errors import ErrorCode


async def run(stack: Stack, agent: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    events = await post_run(stack.http, agent, body)
    assert_valid_stream(events, body["threadId"])
    return events


async def ask(
    stack: Stack, agent: str, thread_id: str, text: str, run_id: str = "r1"
) -> list[dict]:
    """Send ``text``; the interrupts the run ended on."""
    events = await run(stack, agent, run_input(thread_id, run_id, text))
    outcome = events[-1]["outcome"]
    assert outcome["type"] == "interrupt", events
    interrupts: list[dict] = outcome["interrupts"]
    return interrupts


async def answer(
    stack: Stack, agent: str, thread_id: str, interrupt: dict, payload: Any, run_id: str = "r2"
) -> list[dict[str, Any]]:
    entry = {"interruptId": interrupt["id"], "status": "resolved", "payload": payload}
    body = {"threadId": thread_id, "runId": run_id, "messages": [], "resume": [entry]}
    return await run(stack, agent, body)


def reply_text(events: list[dict[str, Any]]) -> str:
    return "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")


def results(events: list[dict[str, Any]]) -> dict[str, str]:
    return {e["toolCallId"]: e["content"] for e in events if e["type"] == "TOOL_CALL_RESULT"}


async def view(stack: Stack, thread_id: str) -> dict[str, Any]:
    body: dict[str, Any] = (await stack.http.get(f"/threads/{thread_id}")).json()
    return body


async def test_agents_are_listed_with_their_tools_and_capabilities(stack: Stack) -> None:
    listed = {a["name"]: a for a in (await stack.http.get("/agents")).json()["agents"]}
    assert {"demo", "files", "transfer", "clarify"} <= set(listed)
    tools = listed["files"]["capabilities"]["tools"]["items"]
    assert [t["name"] for t in tools] == ["inspect_files", "delete_files"]
    assert tools[0]["parameters"]["properties"]["paths"]["type"] == "array"
    capabilities = (await stack.http.get("/agents/transfer/capabilities")).json()
    assert capabilities["humanInTheLoop"]["interrupts"] is True


async def test_files_deletes_after_yes_and_inspects_without_asking(stack: Stack) -> None:
    thread_id = new_thread()
    events = await run(stack, "files", run_input(thread_id, "r1", "clean /tmp/a.log and /var/b"))
    names = [e["toolCallName"] for e in events if e["type"] == "TOOL_CALL_START"]
    assert names == ["inspect_files", "delete_files"]
    inspected = json.loads(next(iter(results(events).values())))
    assert [f["path"] for f in inspected] == ["/tmp/a.log", "/var/b"]
    [interrupt] = events[-1]["outcome"]["interrupts"]
    assert interrupt["reason"] == "tool_call"
    assert (
        interrupt["toolCallId"] == events[types(events).index("TOOL_CALL_START", 5)]["toolCallId"]
    )
    assert interrupt["responseSchema"]["enum"] == ["y", "n", "t"]

    done = await answer(stack, "files", thread_id, interrupt, "y")

    assert json.loads(results(done)[interrupt["toolCallId"]]) == {
        "deleted": ["/tmp/a.log", "/var/b"]
    }
    assert reply_text(done) == "Deleted /tmp/a.log, /var/b."
    assert done[-1]["outcome"] == {"type": "success"}
    assert (await view(stack, thread_id))["state"]["deleted"] == ["/tmp/a.log", "/var/b"]


async def test_files_no_cancels_the_deletion_with_a_message_the_model_reads(stack: Stack) -> None:
    thread_id = new_thread()
    [interrupt] = await ask(stack, "files", thread_id, "clean /tmp/a.log")

    done = await answer(stack, "files", thread_id, interrupt, "n")

    assert results(done)[interrupt["toolCallId"]] == "The user chose not to delete the files."
    assert reply_text(done).startswith("Nothing was deleted.")
    assert "deleted" not in (await view(stack, thread_id))["state"]


async def test_files_trust_is_remembered_for_the_thread(stack: Stack) -> None:
    thread_id = new_thread()
    [interrupt] = await ask(stack, "files", thread_id, "clean /tmp/a.log")
    await answer(stack, "files", thread_id, interrupt, "t")

    later = await run(stack, "files", run_input(thread_id, "r3", "clean /tmp/a.log", "now /tmp/c"))

    assert later[-1]["outcome"] == {"type": "success"}
    assert reply_text(later) == "Deleted /tmp/c."
    thread = await view(stack, thread_id)
    assert thread["state"]["deleted"] == ["/tmp/a.log", "/tmp/c"]
    assert thread["memory"] == {"trustedTools": ["delete_files"]}
    # Another thread is not trusted.
    assert await ask(stack, "files", new_thread(), "clean /tmp/c")


async def test_files_rejects_an_answer_outside_y_n_t(stack: Stack) -> None:
    thread_id = new_thread()
    [interrupt] = await ask(stack, "files", thread_id, "clean /tmp/a.log")

    rejected = await answer(stack, "files", thread_id, interrupt, "maybe")

    assert rejected[-1]["type"] == "RUN_ERROR"
    assert rejected[-1]["code"] == ErrorCode.INVALID_PAYLOAD
    assert (await view(stack, thread_id))["interrupts"] == [interrupt]


async def test_transfer_asks_inside_the_tool_then_restarts_with_the_answer(stack: Stack) -> None:
    thread_id = new_thread()
    [interrupt] = await ask(stack, "transfer", thread_id, "transfer 50 to Robin")
    assert interrupt["reason"] == "confirmation"
    assert interrupt["message"] == "Transfer 50 to Robin?"

    done = await answer(stack, "transfer", thread_id, interrupt, {"approved": True})

    outcome = json.loads(results(done)[interrupt["toolCallId"]])
    assert outcome["status"] == "completed"
    assert outcome["confirmationId"].startswith("tr-")
    assert reply_text(done) == f"Sent 50 to Robin; confirmation {outcome['confirmationId']}."
    assert (await view(stack, thread_id))["state"]["transfers"] == [
        {"to": "Robin", "amount": 50.0, "confirmationId": outcome["confirmationId"]}
    ]


async def test_transfer_rejects_a_resume_that_changes_the_amount(stack: Stack) -> None:
    thread_id = new_thread()
    [interrupt] = await ask(stack, "transfer", thread_id, "transfer 50 to Robin")

    for forged in (
        {"approved": True, "amount": 5000},
        {"approved": True, "editedArgs": {"to": "Mallory", "amount": 50}},
    ):
        rejected = await answer(stack, "transfer", thread_id, interrupt, forged)
        assert rejected[-1]["type"] == "RUN_ERROR"
        assert rejected[-1]["code"] == ErrorCode.INVALID_PAYLOAD

    thread = await view(stack, thread_id)
    assert thread["interrupts"] == [interrupt]
    assert "transfers" not in thread["state"]
    declined = await answer(stack, "transfer", thread_id, interrupt, {"approved": False})
    assert reply_text(declined) == "No money was moved: the transfer was declined."
    assert "transfers" not in (await view(stack, thread_id))["state"]


async def test_clarify_asks_with_options_and_the_choice_is_the_tool_result(stack: Stack) -> None:
    thread_id = new_thread()
    [interrupt] = await ask(stack, "clarify", thread_id, "book a table")
    assert interrupt["reason"] == "input_required"
    assert interrupt["responseSchema"] == {"type": "string", "enum": ["18:00", "19:00", "20:00"]}

    rejected = await answer(stack, "clarify", thread_id, interrupt, "21:00")
    assert rejected[-1]["code"] == ErrorCode.INVALID_PAYLOAD
    done = await answer(stack, "clarify", thread_id, interrupt, "19:00", run_id="r3")

    assert results(done) == {interrupt["toolCallId"]: "19:00"}
    assert reply_text(done) == "Booked for 19:00."


async def test_clarify_does_not_ask_when_a_time_is_named(stack: Stack) -> None:
    events = await run(stack, "clarify", run_input(new_thread(), "r1", "book a table at 20:00"))
    assert events[-1]["outcome"] == {"type": "success"}
    assert reply_text(events) == "Booked for 20:00."
