"""Guards the thread's current details for the Temporal Web UI (``workflows/details.py``):
what it runs, that it is idle, or one plain line per interrupt it waits on."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from ag_ui.core import AssistantMessage, FunctionCall, Interrupt, Message, ToolCall, UserMessage

from workflows.details import ARGUMENTS_SHOWN, current_details
from workflows.models import RunRecord

RUN = RunRecord(key="u1", run_id="r7", started_at=datetime(2026, 5, 1, tzinfo=UTC), first_seq=1)


def calling(tool_call_id: str, name: str, arguments: str) -> AssistantMessage:
    return AssistantMessage(
        id=f"m-{tool_call_id}",
        tool_calls=[
            ToolCall(id=tool_call_id, function=FunctionCall(name=name, arguments=arguments))
        ],
    )


def approval(tool_call_id: str, message: str | None = "Send it?") -> Interrupt:
    return Interrupt(id="i1", reason="tool_call", message=message, tool_call_id=tool_call_id)


def test_a_running_thread_names_its_run() -> None:
    assert current_details(RUN, [Interrupt(id="i1", reason="tool_call")], []) == "Running: run r7"


def test_a_thread_without_a_run_or_interrupts_is_idle() -> None:
    assert current_details(None, [], []) == "Idle: waiting for new input"


@pytest.mark.parametrize(
    ("reason", "label"),
    [
        ("tool_call", "Waiting for approval"),
        ("input_required", "Waiting for input"),
        ("confirmation", "Waiting for confirmation"),
        ("demo:policy_hold", "Waiting (demo:policy_hold)"),
    ],
)
def test_each_reason_has_its_label_and_the_message_follows(reason: str, label: str) -> None:
    waiting = [Interrupt(id="i1", reason=reason, message="Quarterly numbers")]

    assert current_details(None, waiting, []) == f"{label}: Quarterly numbers"


def test_an_interrupt_without_a_message_is_its_label_alone() -> None:
    assert current_details(None, [Interrupt(id="i1", reason="confirmation")], []) == (
        "Waiting for confirmation"
    )


def test_one_line_per_waiting_interrupt_in_order() -> None:
    waiting = [
        Interrupt(id="i1", reason="input_required", message="Form"),
        Interrupt(id="i2", reason="confirmation", message="Sure?"),
    ]

    assert current_details(None, waiting, []).splitlines() == [
        "Waiting for input: Form",
        "Waiting for confirmation: Sure?",
    ]


def test_a_deadline_is_shown_in_utc_to_the_minute() -> None:
    waiting = [
        Interrupt(
            id="i1", reason="input_required", message="Form", expires_at="2026-11-25T17:00:59Z"
        )
    ]

    assert current_details(None, waiting, []) == (
        "Waiting for input: Form, expires 2026-11-25 17:00 UTC"
    )


def test_an_approval_shows_the_tool_call_it_holds() -> None:
    messages: list[Message] = [
        UserMessage(id="u", content="mail a@b.com"),
        calling("tc1", "send_email", json.dumps({"to": "a@b.com", "subject": "Hi"})),
    ]

    assert current_details(None, [approval("tc1")], messages) == (
        "Waiting for approval: send_email(to='a@b.com', subject='Hi')"
    )


def test_the_latest_call_with_the_id_is_shown() -> None:
    messages: list[Message] = [
        calling("tc1", "old_tool", "{}"),
        calling("tc1", "send_email", json.dumps({"to": "a@b.com"})),
    ]

    assert current_details(None, [approval("tc1")], messages) == (
        "Waiting for approval: send_email(to='a@b.com')"
    )


def test_an_approval_whose_call_is_not_in_the_messages_falls_back_to_its_message() -> None:
    messages: list[Message] = [calling("other", "send_email", "{}")]

    assert current_details(None, [approval("tc1")], messages) == "Waiting for approval: Send it?"


@pytest.mark.parametrize("arguments", ["not json", "[1, 2]"], ids=["not-json", "not-an-object"])
def test_arguments_that_are_not_a_json_object_are_shown_as_sent(arguments: str) -> None:
    messages: list[Message] = [calling("tc1", "lookup", arguments)]

    assert current_details(None, [approval("tc1")], messages) == (
        f"Waiting for approval: lookup({arguments})"
    )


def _shown(arguments: dict[str, Any]) -> str:
    messages: list[Message] = [calling("tc1", "send_email", json.dumps(arguments))]
    line = current_details(None, [approval("tc1", message=None)], messages)
    prefix = "Waiting for approval: send_email("
    assert line.startswith(prefix) and line.endswith(")")
    return line[len(prefix) : -1]


def test_long_arguments_are_cut_to_the_limit_with_an_ellipsis() -> None:
    shown = _shown({"body": "x" * 200})

    assert len(shown) == ARGUMENTS_SHOWN
    assert shown == ("body='" + "x" * 200)[: ARGUMENTS_SHOWN - 1] + "…"


def test_arguments_at_the_limit_are_shown_whole() -> None:
    # body='…' is 7 characters around the value.
    shown = _shown({"body": "x" * (ARGUMENTS_SHOWN - 7)})

    assert len(shown) == ARGUMENTS_SHOWN
    assert shown.endswith("x'")
