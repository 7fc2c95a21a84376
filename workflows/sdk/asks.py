"""Questions agent code asks (:class:`Ask`) and the answers it gets back (:class:`Reply`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Generic, TypeVar

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from ag_ui.core import Interrupt
    from pydantic import TypeAdapter, ValidationError
    from temporalio.exceptions import ApplicationError

    from activities.tooling import json_schema
    from workflows.errors import ErrorCode
    from workflows.models import Answer, AnswerStatus
    from workflows.runtime import InterruptRequest

T = TypeVar("T")


@dataclass(frozen=True)
class Ask(Generic[T]):
    """One question for a person: an interrupt as agent code asks for it.

    Args:
        reason: ``tool_call``, ``input_required``, ``confirmation`` or ``<framework>:<name>``.
        message: What the person is asked.
        response: The answer's shape: a type (a pydantic model, ``bool``, a ``Literal``…),
            whose schema the client gets and whose value the agent gets back, or a JSON
            Schema (the agent gets the payload as sent). ``None``: anything.
        expires: A duration from now, or a moment; after it the answer is ``expired``.
        metadata: Passed to the client with the interrupt.
        tool_call_id: The tool call the question is about.
        remind_before: Reminders before ``expires``; the agent's by default.
    """

    reason: str
    message: str | None = None
    response: Any = None
    """``type[T]``, a JSON Schema or ``None`` (typing cannot name ``Literal[...]`` as a
    ``type[T]``, hence ``Any``)."""
    expires: timedelta | datetime | None = None
    metadata: dict[str, Any] | None = None
    tool_call_id: str | None = None
    remind_before: list[timedelta] | None = None

    def request(self, now: datetime) -> InterruptRequest:
        expires_at = now + self.expires if isinstance(self.expires, timedelta) else self.expires
        return InterruptRequest(
            reason=self.reason,
            message=self.message,
            tool_call_id=self.tool_call_id,
            response_schema=json_schema(self.response),
            expires_at=expires_at,
            metadata=self.metadata,
            remind_before=self.remind_before,
        )

    def reply(self, answer: Answer) -> Reply[T]:
        """The answer as agent code receives it: the payload validated as ``response``."""
        value: Any = answer.payload
        if answer.resolved and not isinstance(self.response, dict | None):
            try:
                value = TypeAdapter(self.response).validate_python(answer.payload)
            except ValidationError as error:
                # The client's payload passed the interrupt's JSON Schema, so the
                # schema and the type disagree: a bug in the agent, reported as such.
                raise ApplicationError(
                    f"The answer to {answer.interrupt.id} does not fit {self.response}: {error}",
                    type=ErrorCode.AGENT_FAILED.value,
                    non_retryable=True,
                ) from error
        return Reply(answer.interrupt, answer.status, value if answer.resolved else None)


@dataclass(frozen=True)
class Reply(Generic[T]):
    """A person's answer to an :class:`Ask`."""

    interrupt: Interrupt
    status: AnswerStatus
    """``resolved``, ``cancelled``, or ``expired`` (nobody answered in time)."""
    value: T | None
    """The answer, of the ask's ``response`` type; ``None`` unless ``resolved``."""

    @property
    def resolved(self) -> bool:
        return self.status == "resolved"
