"""What a thread waits for, in plain words, for the Temporal Web UI.

The thread workflow sets this as its current details (Temporal user metadata), which
the UI shows on the workflow's page: an operator sees at a glance
``Waiting for approval: send_email(to='a@b.com', ...), expires 2026-11-25 17:00 UTC``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from ag_ui.core import AssistantMessage, Interrupt, Message

    from workflows.interrupts import parse_expiry
    from workflows.models import RunRecord

ARGUMENTS_SHOWN = 80
"""Characters of a tool call's arguments shown before they are cut with an ellipsis."""
SUBJECT_SHOWN = 200
"""Characters of what an interrupt is about (its message) shown, likewise."""
ARGUMENTS_READ = 16 * 1024
"""A tool call's arguments longer than this are shown as they are, not parsed."""

WAITING_FOR = {
    "tool_call": "Waiting for approval",
    "input_required": "Waiting for input",
    "confirmation": "Waiting for confirmation",
}


def current_details(
    run: RunRecord | None, waiting_on: Sequence[Interrupt], messages: Sequence[Message]
) -> str:
    """One line per open interrupt; or what runs; or that the thread is idle."""
    if run is not None:
        return f"Running: run {run.run_id}"
    if not waiting_on:
        return "Idle: waiting for new input"
    return "\n".join(_waiting_line(interrupt, messages) for interrupt in waiting_on)


def _waiting_line(interrupt: Interrupt, messages: Sequence[Message]) -> str:
    label = WAITING_FOR.get(interrupt.reason, f"Waiting ({interrupt.reason})")
    subject = interrupt.message or ""
    if interrupt.tool_call_id is not None:
        subject = _tool_call(interrupt.tool_call_id, messages) or subject
    line = f"{label}: {_cut(subject, SUBJECT_SHOWN)}" if subject else label
    deadline = parse_expiry(interrupt)
    if deadline is not None:
        line += f", expires {deadline:%Y-%m-%d %H:%M} UTC"
    return line


def _tool_call(tool_call_id: str, messages: Sequence[Message]) -> str | None:
    """``name(arg='value', ...)`` for the call with ``tool_call_id``."""
    call = next(
        (
            call
            for message in reversed(messages)
            if isinstance(message, AssistantMessage)
            for call in message.tool_calls or []
            if call.id == tool_call_id
        ),
        None,
    )
    if call is None:
        return None
    raw = call.function.arguments
    try:
        arguments = json.loads(raw) if len(raw) <= ARGUMENTS_READ else None
    except ValueError:
        arguments = None
    shown = (
        ", ".join(f"{name}={value!r}" for name, value in arguments.items())
        if isinstance(arguments, dict)
        else raw
    )
    return f"{_cut(call.function.name, ARGUMENTS_SHOWN)}({_cut(shown, ARGUMENTS_SHOWN)})"


def _cut(text: str, length: int) -> str:
    """``text``, cut with an ellipsis to ``length`` characters if longer."""
    return text if len(text) <= length else text[: length - 1] + "…"
