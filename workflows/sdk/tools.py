"""Tool calls as the agent's turn sees them: approvals, interrupt-only tools, hooks' view.

The tools themselves (activities) are made with ``activities.tooling.tool``; this module
holds what decides around them, in workflow code.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Annotated, Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from ag_ui.core import Tool as ToolSpec
    from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema, create_model

    from activities.tooling import arguments_model, tool_spec
    from workflows.approvers import Approvers, BoundCall
    from workflows.models import Permit
    from workflows.questions import Ask, Reply


@dataclass
class ToolCallView:
    """A tool call the model asked for, as hooks see it before it runs."""

    id: str
    name: str
    arguments: dict[str, Any]
    cancelled: str | None = None
    """Why the call will not run (the model gets this as the tool's result)."""
    permit: Permit | None = None
    """What the call's approval let through: exactly these ``arguments``, approved by
    ``permit.approvers``. The tool's activity refuses any other arguments
    (``PERMIT_MISMATCH``), so a hook that changes an approved call's arguments stops it."""
    edited_by: list[str] | None = None
    """Who approved the call with arguments of their own (``editedArgs``) in place of
    the model's; ``None`` when it runs with the arguments proposed."""

    def cancel(self, message: str) -> None:
        """Do not run the call; ``message`` is its result, which the model reads."""
        self.cancelled = message

    def apply(self, reply: Reply[Decision]) -> None:
        """Act on the answer to the call's approval: without an approval the call does
        not run; with one it runs under the approval's permit, on the approver's
        ``editedArgs`` if they sent other arguments."""
        decision = reply.value
        if not reply.resolved or decision is None:
            self.cancel(unanswered(reply.status))
        elif not decision.approved:
            self.cancel("Not run: the user denied it.")
        else:
            self.permit = reply.permit
            edits = decision.edits
            if edits is not None:
                # Taken even when equal (50 == 50.0): the permit binds them as sent.
                if edits != self.arguments:
                    self.edited_by = list(reply.decided_by)
                self.arguments = edits

    def content(self, result: Any) -> str:
        """The call's result as the conversation keeps it (``TOOL_CALL_RESULT`` and the
        tool message the model reads next): the result (JSON, unless a string) or, for a
        call a person edited, ``{"editedArgs", "editedBy", "result"}``, so that neither
        the model nor the client takes it for what the model proposed."""
        if self.edited_by is None:
            return result if isinstance(result, str) else json.dumps(result)
        edited = {"editedArgs": self.arguments, "editedBy": self.edited_by, "result": result}
        return json.dumps(edited)


def unanswered(status: str) -> str:
    """The result of a call whose question was not answered (``cancelled``, ``expired``)."""
    return f"Not run: the question was {status}."


class Decision(BaseModel):
    """A person's answer to an approval: its schema is the interrupt's ``responseSchema``
    and it parses the answer, so the two cannot disagree. Unknown fields (a misspelt
    ``editArgs``) are rejected with ``INVALID_PAYLOAD``, never ignored."""

    model_config = ConfigDict(extra="forbid", strict=True, populate_by_name=True)

    approved: bool

    @property
    def edits(self) -> dict[str, Any] | None:
        """The arguments the approver replaced the call's with, if the approval offers
        edits and they sent some."""
        edited: dict[str, Any] | None = getattr(self, "edited_args", None)
        return edited


DECISION_MODELS_KEPT = 256
"""The most models :func:`decision_model` keeps made: one per tool with edits an agent
has, so it is never reached but by tools that clients define."""


def decision_model(spec: ToolSpec, edits: bool) -> type[Decision]:
    """The :class:`Decision` for calls of ``spec``; with ``edits``, it has ``editedArgs``
    whose schema is the tool's own parameters schema.

    Made once per tool and parameters schema, then kept: making a pydantic model is
    the costliest part of a turn that asks for an approval. The model depends on nothing
    else, so a kept one is the model a new one would be, and the workflow stays
    deterministic.
    """
    if not edits:
        return Decision
    return _edits_model(spec.name, json.dumps(spec.parameters))


@functools.lru_cache(maxsize=DECISION_MODELS_KEPT)
def _edits_model(name: str, parameters: str) -> type[Decision]:
    """The :class:`Decision` with ``editedArgs`` for calls of tool ``name``, whose
    parameters schema is ``parameters`` (JSON text, its keys in the tool's order)."""
    schema = {
        **(json.loads(parameters) or {}),
        "description": "Full replacement of the tool args. Not merged.",
        "additionalProperties": False,
    }
    return create_model(
        f"{name}_decision",
        __base__=Decision,
        edited_args=(
            Annotated[dict[str, Any] | None, WithJsonSchema(schema)],
            Field(default=None, alias="editedArgs"),
        ),
    )


@dataclass(frozen=True)
class Approval:
    """A tool whose calls wait for a person's approval (a ``tool_call`` interrupt).

    Args:
        edits: Offer approve-with-edits: the answer's ``editedArgs`` replace the call's
            arguments (validated against the tool's schema).
        when: Ask only for calls whose arguments this returns true for (Genkit's
            conditional interrupt); always by default.
        message: What the person is asked about the call.
        expires: How long the approval may take, or until when; then the call does not
            run (the answer is ``expired``).
        remind_before: Reminders before ``expires``; the agent's by default.
        metadata: Passed to the client with the interrupt.
        approvers: Who may approve: a policy, or a function of the call's arguments
            returning one (e.g. by amount; ``None``: the thread's owner). An approval
            whose ``editedArgs`` would need a stricter policy is refused
            (``POLICY_EXCEEDED``).
    """

    edits: bool = False
    when: Callable[[dict[str, Any]], bool] | None = None
    message: Callable[[ToolCallView], str] | None = None
    expires: timedelta | datetime | None = None
    remind_before: list[timedelta] | None = None
    metadata: dict[str, Any] | None = None
    approvers: Approvers | Callable[[dict[str, Any]], Approvers | None] | None = None

    def applies(self, call: ToolCallView) -> bool:
        return self.when is None or self.when(call.arguments)

    def approvers_for(self, arguments: dict[str, Any]) -> Approvers | None:
        """The policy approving a call with ``arguments`` follows."""
        if callable(self.approvers):
            return self.approvers(arguments)
        return self.approvers

    def ask(self, call: ToolCallView, spec: ToolSpec) -> Ask[Decision]:
        message = self.message(call) if self.message else _default_message(call)
        return Ask(
            "tool_call",
            message=message,
            response=decision_model(spec, self.edits),
            expires=self.expires,
            metadata=self.metadata,
            tool_call_id=call.id,
            remind_before=self.remind_before,
            approvers=self.approvers_for(call.arguments),
            call=BoundCall(name=call.name, arguments=call.arguments),
        )


ARGUMENTS_IN_MESSAGE = 200
"""Characters of a call's arguments an approval's default message shows (an interrupt's
size is budgeted, ``workflows/budgets.py``; the arguments may be long)."""


def _default_message(call: ToolCallView) -> str:
    shown = str(call.arguments)
    if len(shown) > ARGUMENTS_IN_MESSAGE:
        shown = shown[: ARGUMENTS_IN_MESSAGE - 1] + "…"
    return f"Run {call.name}({shown})?"


@dataclass(frozen=True)
class InterruptTool:
    """A tool that only asks a person (Genkit's ``defineInterrupt``, .NET's user-input
    request): the model's call becomes an interrupt, and the answer its result."""

    name: str
    spec: ToolSpec
    arguments: type[BaseModel]
    ask: Callable[..., Ask[Any]] = field(repr=False)


def interrupt_tool(ask: Callable[..., Ask[Any]]) -> InterruptTool:
    """Make ``ask`` (typed parameters, returns the :class:`Ask`) an interrupt-only tool.

    The model sees the function's name, docstring and parameter schema like any tool's.
    The interrupt is bound to the call (``toolCallId``).
    """
    name = ask.__name__
    arguments = arguments_model(ask, name)
    return InterruptTool(name, tool_spec(ask, name, arguments), arguments, ask)
