"""Tool calls as the agent's turn sees them: approvals, interrupt-only tools, hooks' view.

The tools themselves (activities) are made with ``activities.tooling.tool``; this module
holds what decides around them, in workflow code.
"""

from __future__ import annotations

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
    from workflows.questions import Ask


@dataclass
class ToolCallView:
    """A tool call the model asked for, as hooks see it before it runs."""

    id: str
    name: str
    arguments: dict[str, Any]
    cancelled: str | None = None
    """Why the call will not run (the model gets this as the tool's result)."""

    def cancel(self, message: str) -> None:
        """Do not run the call; ``message`` is its result, which the model reads."""
        self.cancelled = message


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


def decision_model(spec: ToolSpec, edits: bool) -> type[Decision]:
    """The :class:`Decision` for calls of ``spec``; with ``edits``, it has ``editedArgs``
    whose schema is the tool's own parameters schema."""
    if not edits:
        return Decision
    schema = {
        **(spec.parameters or {}),
        "description": "Full replacement of the tool args. Not merged.",
        "additionalProperties": False,
    }
    return create_model(
        f"{spec.name}_decision",
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
