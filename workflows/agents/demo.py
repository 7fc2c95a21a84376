"""The ``demo`` agent: every kind of interrupt, deterministically, on the agent SDK.

It reads the latest user message (its first ``SCANNED_CHARS`` characters: the turn is
workflow code, which must not spend long on a client's text) and, in one run, asks
everything that applies: an approval (with edits) for each email address, a form for the
word ``quarterly``, a yes/no for ``confirm`` and a custom policy hold for ``policy``. With
none of them its model answers. Its turn is custom code over the SDK's steps: all
questions at once, then one summary of what each answer led to.

It declares what a client may send it: ``forwardedProps`` that time the form
(:class:`FormTiming`) and the state it shares (:data:`DEMO_STATE`, what it writes itself),
so its code reads them knowing they fit.

``send_email`` stands in for a mail API. With a mail URL configured
(``AGUI_DEMO_MAIL_URL``) it posts each email there as JSON; without one it delivers
nothing. Either way it behaves as a side effect should: the call's idempotency key makes
a retried call a repeat the mail API recognises, never a second email. It is a regular
activity, not a local one: a local activity runs again whenever the workflow task that
ran it is retried.
"""

from __future__ import annotations

import hashlib
import json
import re
from datetime import timedelta
from typing import Annotated, Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from ag_ui.core import RunAgentInput
    from pydantic import BaseModel, ConfigDict, Field
    from pydantic.alias_generators import to_camel

    from activities.webhooks import post_json
    from settings import process_settings
    from workflows.sdk import (
        AgentContext,
        AgentDefinition,
        Approval,
        Ask,
        ChatReply,
        ChatRequest,
        ProposedCall,
        Reply,
        ScriptedModel,
        ToolCallView,
        last_user_text,
        tool,
        tool_context,
    )

EMAIL = re.compile(r"(?<![\w.+-])[\w.+-]++@[\w-]++(?:\.[\w-]++)+")
"""An email address. Possessive, and starting only where a word does, so a scan is linear
in the text's length whatever the text (without both it is quadratic on a long run of
word characters with no ``@``)."""
SCANNED_CHARS = 4_000
"""Characters of the latest user message the turn reads (and mails as the body)."""
DEFAULT_EXPIRY = timedelta(days=3)
MAX_SECONDS = 365 * 24 * 3600

Address = Annotated[str, Field(json_schema_extra={"format": "email"})]


APPROVAL = Approval(
    edits=True,
    message=lambda call: (
        f"Send email to {call.arguments['to']} with subject 'Hi'? You can edit it first."
    ),
)


@tool(approval=APPROVAL, heartbeat=timedelta(seconds=5))
async def send_email(to: Address, subject: str, body: str) -> dict[str, str]:
    """Send an email; the message id is a function of the call's idempotency key."""
    key = tool_context().idempotency_key
    settings = process_settings()
    if settings.demo_mail_url is not None:
        email = {"to": to, "subject": subject, "body": body}
        await post_json(settings.demo_mail_url, email, key, settings.webhook_timeout_seconds)
    return {"messageId": f"msg-{hashlib.sha256(key.encode()).hexdigest()[:12]}"}


def echo(request: ChatRequest) -> ChatReply:
    """A fixed, predictable reply to the newest user message."""
    prompt = last_user_text(request.messages).strip()
    return ChatReply(text=f"You said: {prompt}" if prompt else "Say something and I will answer.")


MODEL = ScriptedModel("demo", echo)

QUARTERLY_FILING_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "quarter": {"type": "string", "enum": ["Q1", "Q2", "Q3", "Q4"]},
        "year": {"type": "integer", "minimum": 2000},
        "revenue": {"type": "number"},
    },
    "required": ["quarter", "year", "revenue"],
}
"""The spec's quarterly-filing form."""

Seconds = Annotated[int, Field(ge=1, le=MAX_SECONDS)]
"""A duration in whole seconds, at most a year."""


class FormTiming(BaseModel):
    """The ``forwardedProps`` the demo accepts: when the quarterly form expires and when
    to be reminded of it, e.g. ``{"expiresInSeconds": 86400, "remindBeforeSeconds":
    [7200, 3600]}``. Both are optional; nothing else is accepted."""

    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, populate_by_name=True)

    expires_in_seconds: Seconds | None = None
    """The form's lifetime; three days when absent."""
    remind_before_seconds: Annotated[list[Seconds], Field(max_length=5)] | None = None
    """Reminders this long before the deadline; the agent's (a day) when absent."""


SENT_EMAIL: dict[str, Any] = {
    "type": "object",
    "properties": {
        "to": {"type": "string"},
        "subject": {"type": "string"},
        "body": {"type": "string"},
    },
    "required": ["to", "subject", "body"],
    "additionalProperties": False,
}
DEMO_STATE: dict[str, Any] = {
    "type": "object",
    "properties": {
        "outbox": {"type": "array", "items": SENT_EMAIL},
        "filings": {"type": "array", "items": QUARTERLY_FILING_SCHEMA},
    },
    "additionalProperties": False,
}
"""The state the demo shares: what it writes (``outbox``, ``filings``), which a client
sends back; no other key."""


async def demo_turn(ctx: AgentContext) -> None:
    """Ask every question the latest user message calls for, then act on the answers."""
    text = ctx.latest_user_text()[:SCANNED_CHARS]
    words = set(re.findall(r"[a-z]+", text.lower()))
    calls = ctx.propose(
        [
            ProposedCall(name="send_email", arguments={"to": to, "subject": "Hi", "body": text})
            for to in EMAIL.findall(text)
        ]
    )
    asks = [APPROVAL.ask(call, send_email.spec) for call in calls] + _questions(ctx, words)
    if not asks:
        await ctx.model()
        return
    replies = await ctx.interrupt_all(asks)
    lines = [await _email(ctx, call, reply) for call, reply in zip(calls, replies, strict=False)]
    for reply in replies[len(calls) :]:
        lines.append(_outcome(ctx, reply))
    ctx.say(" ".join(lines))


def _questions(ctx: AgentContext, words: set[str]) -> list[Ask[Any]]:
    asks: list[Ask[Any]] = []
    if "quarterly" in words:
        asks.append(
            Ask(
                "input_required",
                message="Please provide the quarterly filing details.",
                response=QUARTERLY_FILING_SCHEMA,
                expires=form_expiry(ctx.input),
                remind_before=form_reminders(ctx.input),
            )
        )
    if "confirm" in words:
        asks.append(Ask("confirmation", message="Do you confirm?", response=bool))
    if "policy" in words:
        asks.append(
            Ask(
                "demo:policy_hold",
                message="This request is on hold until a policy reviewer releases it.",
            )
        )
    return asks


async def _email(ctx: AgentContext, call: ToolCallView, reply: Reply[Any]) -> str:
    """Send the email the reply approved (with its edits, under its permit), or report
    why not."""
    decision = reply.value
    if not reply.resolved or decision is None or not decision.approved:
        why = "denied" if reply.resolved else reply.status
        ctx.tool_result(call, json.dumps({"sent": False, "reason": why}))
        return f"Email to {call.arguments['to']}: Not sent: {why}."
    call.apply(reply)
    sent = await ctx.call_tool(call)
    email = call.arguments
    ctx.state.setdefault("outbox", []).append(
        {"to": email["to"], "subject": email["subject"], "body": email["body"]}
    )
    ctx.tool_result(call, call.content({"sent": True, **sent}))
    return f"Email to {email['to']}: sent."


def _outcome(ctx: AgentContext, reply: Reply[Any]) -> str:
    """The line for an answer to one of the agent's own questions."""
    match reply.interrupt.reason:
        case "input_required":
            if not reply.resolved:
                return f"Quarterly filing: {reply.status}, nothing filed."
            filing: dict[str, Any] = reply.value or {}
            ctx.state.setdefault("filings", []).append(filing)
            return f"Filed {filing['quarter']} {filing['year']} with revenue {filing['revenue']}."
        case "confirmation":
            if not reply.resolved:
                return f"Confirmation: {reply.status}."
            return "Confirmed." if reply.value is True else "Not confirmed."
        case _:
            return "Policy hold released." if reply.resolved else f"Policy hold {reply.status}."


DEMO = AgentDefinition(
    name="demo",
    description=(
        "Asks approval before emailing each address you mention; 'quarterly' asks for a "
        "filing, 'confirm' for a yes/no, 'policy' puts a policy hold; otherwise echoes."
    ),
    model=MODEL,
    tools=[send_email],
    remind_before=(timedelta(days=1),),
    turn=demo_turn,
    state=DEMO_STATE,
    forwarded_props=FormTiming,
)


def form_expiry(run_input: RunAgentInput) -> timedelta:
    """``forwardedProps.expiresInSeconds``, or three days."""
    seconds = _timing(run_input).expires_in_seconds
    return DEFAULT_EXPIRY if seconds is None else timedelta(seconds=seconds)


def form_reminders(run_input: RunAgentInput) -> list[timedelta] | None:
    """``forwardedProps.remindBeforeSeconds``, or ``None`` for the agent's default."""
    seconds = _timing(run_input).remind_before_seconds
    return None if seconds is None else [timedelta(seconds=s) for s in seconds]


def _timing(run_input: RunAgentInput) -> FormTiming:
    """The run's ``forwardedProps``, which the thread admitted only if they fit
    :class:`FormTiming`'s schema (a run no client sent has none)."""
    return FormTiming.model_validate(run_input.forwarded_props or {})
