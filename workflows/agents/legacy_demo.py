"""The ``demo`` agent as it was before the SDK: it still serves the turns of threads
that began under it (see ``workflows/agents/demo.py``).

Kept unchanged so that those threads replay and resume exactly as they ran: remove it,
with its patch, once no thread of that age remains (``docs/operations.md``). Its
``send_email`` and ``generate_reply`` activities stay registered for the same reason.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from ag_ui.core import (
        AgentCapabilities,
        HumanInTheLoopCapabilities,
        IdentityCapabilities,
        StateCapabilities,
    )

    from activities.email import Mailer, SendEmailInput
    from activities.model import GenerateReplyInput, generate_reply
    from workflows.agents.demo_forms import (
        QUARTERLY_FILING_SCHEMA,
        form_expiry,
        form_reminders,
    )
    from workflows.models import Answer
    from workflows.runtime import InterruptRequest, RunContext

EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")

APPROVE_WITH_EDITS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approved": {"type": "boolean"},
        "editedArgs": {
            "type": "object",
            "description": "Full replacement of the tool args. Not merged.",
            "properties": {
                "to": {"type": "string", "format": "email"},
                "subject": {"type": "string"},
                "body": {"type": "string"},
            },
            "required": ["to", "subject", "body"],
            "additionalProperties": False,
        },
    },
    "required": ["approved"],
}

CONFIRMATION_SCHEMA: dict[str, Any] = {"type": "boolean"}

MODEL_OPTIONS: dict[str, Any] = {
    "start_to_close_timeout": timedelta(seconds=30),
    "retry_policy": RetryPolicy(maximum_attempts=5),
}
"""The model call is a regular activity: a real model takes seconds and streams."""
TOOL_OPTIONS: dict[str, Any] = {
    "start_to_close_timeout": timedelta(seconds=10),
    "retry_policy": RetryPolicy(maximum_attempts=5),
}
"""``send_email`` is a short call, so it runs as a local activity: in the worker, inside
the workflow task that the approval opened, instead of a round trip through the task
queue and a second workflow task. That cuts what a person waits for after approving by
about a quarter (``docs/bench.md``). Retries are the same, and so is delivery: at least
once, made effectively once by the idempotency key."""


class LegacyDemo:
    """A deterministic agent that exercises the whole interrupt lifecycle."""

    name = "demo"
    remind_before: Sequence[timedelta] = (timedelta(days=1),)
    description = (
        "Asks approval before emailing each address you mention; 'quarterly' asks for a "
        "filing, 'confirm' for a yes/no, 'policy' puts a policy hold; otherwise echoes."
    )

    def capabilities(self) -> AgentCapabilities:
        """Interrupts of every core reason, approve-with-edits, persistent state."""
        return AgentCapabilities(
            identity=IdentityCapabilities(name=self.name, description=self.description),
            state=StateCapabilities(snapshots=True, persistent_state=True),
            human_in_the_loop=HumanInTheLoopCapabilities(
                supported=True, approvals=True, interrupts=True, approve_with_edits=True
            ),
        )

    async def run(self, ctx: RunContext) -> None:
        """Raise every interrupt the latest user message calls for, then act on the answers."""
        text = ctx.latest_user_text()
        words = set(re.findall(r"[a-z]+", text.lower()))
        addresses = EMAIL.findall(text)
        calls = ctx.propose_tool_calls(
            [("send_email", {"to": to, "subject": "Hi", "body": text}) for to in addresses]
        )
        requests = [
            InterruptRequest(
                reason="tool_call",
                tool_call_id=call.id,
                message=f"Send email to {to} with subject 'Hi'? You can edit it first.",
                response_schema=APPROVE_WITH_EDITS_SCHEMA,
            )
            for call, to in zip(calls, addresses, strict=True)
        ]
        if "quarterly" in words:
            requests.append(
                InterruptRequest(
                    reason="input_required",
                    message="Please provide the quarterly filing details.",
                    response_schema=QUARTERLY_FILING_SCHEMA,
                    expires_at=ctx.now() + form_expiry(ctx.input),
                    remind_before=form_reminders(ctx.input),
                )
            )
        if "confirm" in words:
            requests.append(
                InterruptRequest(
                    reason="confirmation",
                    message="Do you confirm?",
                    response_schema=CONFIRMATION_SCHEMA,
                )
            )
        if "policy" in words:
            requests.append(
                InterruptRequest(
                    reason="demo:policy_hold",
                    message="This request is on hold until a policy reviewer releases it.",
                )
            )
        if requests:
            ctx.interrupt(requests)
            return
        reply = await workflow.execute_activity(
            generate_reply, GenerateReplyInput(prompt=text), **MODEL_OPTIONS
        )
        ctx.say(reply.chunks)

    async def resume(self, ctx: RunContext, answers: list[Answer]) -> None:
        """Act on each answer, then report what happened in one message.

        Everything needed is in the answers' interrupts (the approval's tool call is
        found by its id), so this works however long ago, and in whichever workflow
        run, the interrupts were raised.
        """
        lines = []
        for answer in answers:
            match answer.interrupt.reason:
                case "tool_call":
                    lines.append(await _email(ctx, answer))
                case "input_required":
                    lines.append(_filing(ctx, answer))
                case "confirmation":
                    lines.append(_confirmation(answer))
                case _:
                    lines.append(_policy(answer))
        ctx.say([" ".join(lines)])


async def _email(ctx: RunContext, answer: Answer) -> str:
    """Send the email the answer approved (with its edits), or report why not."""
    assert answer.interrupt.tool_call_id is not None, "approvals are bound to a tool call"
    call = ctx.tool_call(answer.interrupt.tool_call_id)
    args = json.loads(call.function.arguments)
    if not answer.resolved or not answer.payload.get("approved"):
        why = {"resolved": "denied", "cancelled": "cancelled", "expired": "expired"}
        outcome = f"Not sent: {why[answer.status]}."
        ctx.tool_result(call, json.dumps({"sent": False, "reason": why[answer.status]}))
        return f"Email to {args['to']}: {outcome}"
    email = answer.payload.get("editedArgs") or args
    # Thread, tool call and the approval that let it run: the same approved call, run
    # again by a retry or a replayed workflow task, is the same email.
    key = f"{workflow.info().workflow_id}/{call.id}/{answer.interrupt.id}"
    sent = await workflow.execute_local_activity_method(
        Mailer.send_email, SendEmailInput(**email, idempotency_key=key), **TOOL_OPTIONS
    )
    ctx.state.setdefault("outbox", []).append(
        {"to": email["to"], "subject": email["subject"], "body": email["body"]}
    )
    ctx.tool_result(call, json.dumps({"sent": True, "messageId": sent.message_id}))
    return f"Email to {email['to']}: sent."


def _filing(ctx: RunContext, answer: Answer) -> str:
    if not answer.resolved:
        return f"Quarterly filing: {answer.status}, nothing filed."
    filing = answer.payload
    ctx.state.setdefault("filings", []).append(filing)
    return f"Filed {filing['quarter']} {filing['year']} with revenue {filing['revenue']}."


def _confirmation(answer: Answer) -> str:
    if not answer.resolved:
        return f"Confirmation: {answer.status}."
    return "Confirmed." if answer.payload is True else "Not confirmed."


def _policy(answer: Answer) -> str:
    return "Policy hold released." if answer.resolved else f"Policy hold {answer.status}."
