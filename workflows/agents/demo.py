"""The ``demo`` agent: every kind of interrupt, deterministically, on the agent SDK.

It reads the latest user message and, in one run, asks everything that applies: an
approval (with edits) for each email address, a form for the word ``quarterly``, a yes/no
for ``confirm`` and a custom policy hold for ``policy``. With none of them its model
answers. Its turn is custom code over the SDK's steps: all questions at once, then one
summary of what each answer led to.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from ag_ui.core import AgentCapabilities

    from activities import demo
    from activities.chat import ProposedCall
    from activities.model import generate_reply
    from workflows.agents.demo_forms import (
        QUARTERLY_FILING_SCHEMA,
        form_expiry,
        form_reminders,
    )
    from workflows.agents.legacy_demo import LegacyDemo
    from workflows.models import Answer
    from workflows.runtime import RunContext
    from workflows.sdk.agent import AgentDefinition
    from workflows.sdk.asks import Ask, Reply
    from workflows.sdk.context import AgentContext
    from workflows.sdk.tools import Approval, ToolCallView

EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
SDK_PATCH = "demo-on-sdk"
"""Turns begun before it run on :class:`LegacyDemo`."""

APPROVAL = Approval(
    edits=True,
    message=lambda call: (
        f"Send email to {call.arguments['to']} with subject 'Hi'? You can edit it first."
    ),
)


async def demo_turn(ctx: AgentContext) -> None:
    """Ask every question the latest user message calls for, then act on the answers."""
    text = ctx.latest_user_text()
    words = set(re.findall(r"[a-z]+", text.lower()))
    calls = ctx.propose(
        [
            ProposedCall(name="send_email", arguments={"to": to, "subject": "Hi", "body": text})
            for to in EMAIL.findall(text)
        ]
    )
    asks = [APPROVAL.ask(call, demo.send_email.spec) for call in calls] + _questions(ctx, words)
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
    """Send the email the reply approved (with its edits), or report why not."""
    decision = reply.value or {}
    if not reply.resolved or not decision.get("approved"):
        why = "denied" if reply.resolved else reply.status
        ctx.tool_result(call, json.dumps({"sent": False, "reason": why}))
        return f"Email to {call.arguments['to']}: Not sent: {why}."
    email = decision.get("editedArgs") or call.arguments
    sent = await ctx.call_tool(ToolCallView(call.id, call.name, email))
    ctx.state.setdefault("outbox", []).append(
        {"to": email["to"], "subject": email["subject"], "body": email["body"]}
    )
    ctx.tool_result(call, json.dumps({"sent": True, **sent}))
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
    model=demo.MODEL,
    tools=[demo.send_email],
    approvals={"send_email": APPROVAL},
    remind_before=(timedelta(days=1),),
    turn=demo_turn,
)


class DemoAgent:
    """``demo`` as served: :data:`DEMO`, except for turns that began on
    :class:`LegacyDemo` (before ``SDK_PATCH``), which finish on it."""

    name = DEMO.name
    description = DEMO.description
    remind_before: Sequence[timedelta] = DEMO.remind_before

    def __init__(self) -> None:
        self._legacy = LegacyDemo()

    def capabilities(self) -> AgentCapabilities:
        return DEMO.capabilities()

    def activities(self) -> list[Callable[..., Any]]:
        """Both versions' (the legacy ``send_email`` needs settings: the worker adds it)."""
        return [*DEMO.activities(), generate_reply]

    async def run(self, ctx: RunContext) -> None:
        if workflow.patched(SDK_PATCH):
            await DEMO.run(ctx)
        else:
            await self._legacy.run(ctx)

    async def resume(self, ctx: RunContext, answers: list[Answer]) -> None:
        # A turn the SDK paused has a journal; one the legacy agent paused has none.
        if ctx.journal.scopes:
            await DEMO.resume(ctx, answers)
        else:
            await self._legacy.resume(ctx, answers)
