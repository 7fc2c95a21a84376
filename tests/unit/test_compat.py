"""Guards the earlier interrupt draft's compatibility (``gateway/compat.py``): its resume
object is read as one ``resolved`` entry, and ``?compat=draft`` output keeps its shape."""

from __future__ import annotations

from typing import Any

import pytest
from ag_ui.core import (
    BaseEvent,
    Interrupt,
    RunAgentInput,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    TextMessageContentEvent,
)

from gateway.compat import encode_draft, normalise_draft_resume

BODY: dict[str, Any] = {"threadId": "t", "runId": "r2", "messages": []}


# --- normalise_draft_resume -----------------------------------------------------------------


def test_a_draft_resume_object_becomes_one_resolved_entry() -> None:
    body = {**BODY, "resume": {"interruptId": "i1", "payload": {"approved": True}}}

    normalised = normalise_draft_resume(body)

    assert normalised == {
        **BODY,
        "resume": [{"status": "resolved", "interruptId": "i1", "payload": {"approved": True}}],
    }
    run_input = RunAgentInput.model_validate(normalised)
    assert run_input.resume is not None
    [entry] = run_input.resume
    assert (entry.interrupt_id, entry.status, entry.payload) == (
        "i1",
        "resolved",
        {"approved": True},
    )


def test_the_callers_body_is_left_as_it_was() -> None:
    body = {**BODY, "resume": {"interruptId": "i1", "payload": 1}}

    normalise_draft_resume(body)

    assert body["resume"] == {"interruptId": "i1", "payload": 1}


@pytest.mark.parametrize(
    "body",
    [
        {**BODY, "resume": [{"interruptId": "i1", "status": "cancelled"}]},
        {**BODY, "resume": None},
        BODY,
        [1, 2],
        "text",
        None,
    ],
    ids=["1.0-list", "null", "no-resume", "json-list", "json-string", "json-null"],
)
def test_anything_but_a_draft_resume_object_passes_unchanged(body: Any) -> None:
    assert normalise_draft_resume(body) == body


# --- encode_draft -------------------------------------------------------------------------


def test_an_interrupted_run_finished_carries_the_drafts_single_interrupt_too() -> None:
    first = Interrupt(
        id="i1",
        reason="tool_call",
        message="Send it?",
        tool_call_id="tc1",
        expires_at="2026-11-25T17:00:00Z",
    )
    second = Interrupt(id="i2", reason="confirmation")
    event = RunFinishedEvent(
        thread_id="t",
        run_id="r",
        outcome=RunFinishedInterruptOutcome(interrupts=[first, second]),
    )

    data = encode_draft(event)

    assert data["type"] == "RUN_FINISHED"
    assert (data["threadId"], data["runId"]) == ("t", "r")
    assert data["outcome"] == "interrupt"
    assert data["interrupt"] == {
        "id": "i1",
        "reason": "tool_call",
        "payload": {
            "message": "Send it?",
            "toolCallId": "tc1",
            "expiresAt": "2026-11-25T17:00:00Z",
        },
    }
    assert [item["id"] for item in data["interrupts"]] == ["i1", "i2"]
    assert data["interrupts"][0]["toolCallId"] == "tc1"


@pytest.mark.parametrize(
    "event",
    [
        RunFinishedEvent(thread_id="t", run_id="r", outcome=RunFinishedSuccessOutcome()),
        RunFinishedEvent(thread_id="t", run_id="r"),
        TextMessageContentEvent(message_id="m", delta="hi"),
    ],
    ids=["success", "no-outcome", "other-event"],
)
def test_every_other_event_is_encoded_as_in_1_0(event: BaseEvent) -> None:
    assert encode_draft(event) == event.model_dump(mode="json", by_alias=True)
