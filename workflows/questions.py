"""Questions for a person: what agent code asks (:class:`Ask`), the interrupt it opens
(:class:`Question`), and the answer it gets back (:class:`Reply`).

Every place that asks (a turn, a hook, an approval, a tool, an interrupt-only tool)
asks an :class:`Ask`, so every question has the same options. A tool asks from an
activity, so the question crosses into the workflow as data: a :class:`Question`, the
ask with its answer's shape as a JSON Schema and its deadline as a moment. Agent code
and activities both import this module; it imports neither.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Generic, TypeVar

from ag_ui.core import Interrupt
from pydantic import TypeAdapter, ValidationError
from temporalio.exceptions import ApplicationError

from workflows.approvers import Approvers, BoundCall
from workflows.budgets import expiry
from workflows.errors import ErrorCode
from workflows.models import Answer, AnswerStatus, Model, Permit, Reminder

T = TypeVar("T")


class Question(Model):
    """An :class:`Ask` as the thread opens it as an interrupt (and gives it its id)."""

    reason: str
    message: str | None = None
    response_schema: dict[str, Any] | None = None
    expires_at: datetime | None = None
    metadata: dict[str, Any] | None = None
    tool_call_id: str | None = None
    remind_before: list[timedelta] | None = None
    """Reminders (by webhook) this long before ``expires_at``; ``None``: the agent's. A
    reminder already past when asked is skipped."""
    approvers: Approvers | None = None
    """Who may answer; ``None``: the thread's owner."""
    call: BoundCall | None = None
    """The tool call an approval is about: an approved answer gives it a permit."""

    def interrupt(self, interrupt_id: str) -> Interrupt:
        """The interrupt as clients see it, with the id the thread gave it."""
        return Interrupt(
            id=interrupt_id,
            reason=self.reason,
            message=self.message,
            tool_call_id=self.tool_call_id,
            response_schema=self.response_schema,
            expires_at=_iso_utc(self.expires_at) if self.expires_at else None,
            metadata=self.metadata,
        )

    def reminders(
        self, interrupt_id: str, default: Sequence[timedelta], now: datetime
    ) -> list[Reminder]:
        """The reminders still ahead of ``now`` for the interrupt this question opened,
        ``default`` (the agent's) unless it says otherwise."""
        if self.expires_at is None:
            return []
        expires_at = self.expires_at
        ahead = default if self.remind_before is None else self.remind_before
        return [
            Reminder(interrupt_id=interrupt_id, at=expires_at - before)
            for before in ahead
            if expires_at - before > now
        ]


@dataclass(frozen=True)
class Ask(Generic[T]):
    """One question for a person.

    Args:
        reason: ``tool_call``, ``input_required``, ``confirmation`` or ``<framework>:<name>``.
        message: What the person is asked.
        response: The answer's shape: a type (a pydantic model, ``bool``, a ``Literal``…),
            whose schema the client gets and whose value the agent gets back, or a JSON
            Schema (the agent gets the payload as sent). ``None``: anything.
        expires: A duration from now, or a moment (with a time zone); after it the answer
            is ``expired``. At most ``budgets.MAX_EXPIRY`` (365 days) ahead.
        metadata: Passed to the client with the interrupt.
        tool_call_id: The tool call the question is about (set by the SDK for approvals
            and for tools that ask).
        remind_before: Reminders before ``expires``; the agent's by default. At most
            ``budgets.MAX_REMINDERS_PER_INTERRUPT`` (5), each within ``MAX_EXPIRY``.
        approvers: Who may answer (users, groups, n-of-m, separation of duties,
            escalation); the thread's owner by default.
        call: The tool call an approval is about (set by the SDK for approvals): once
            approved, the call runs under a permit for exactly the approved arguments.
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
    approvers: Approvers | None = None
    call: BoundCall | None = None

    def question(self, now: datetime) -> Question:
        """The interrupt to open, ``now`` being the moment it is asked.

        Raises:
            ApplicationError: ``INVALID_QUESTION``: ``expires`` is further ahead than
                ``budgets.MAX_EXPIRY``, or a moment without a time zone.
        """
        return Question(
            reason=self.reason,
            message=self.message,
            response_schema=json_schema(self.response),
            expires_at=expiry(self.expires, now),
            metadata=self.metadata,
            tool_call_id=self.tool_call_id,
            remind_before=self.remind_before,
            approvers=self.approvers,
            call=self.call,
        )

    def reply(self, answer: Answer) -> Reply[T]:
        """The answer as agent code receives it: the payload validated as ``response``."""
        value: Any = answer.payload
        if answer.resolved and not isinstance(self.response, dict | None):
            try:
                value = _adapter(self.response).validate_python(answer.payload)
            except ValidationError as error:
                # The client's payload passed the interrupt's JSON Schema, so the
                # schema and the type disagree: a bug in the agent, reported as such.
                raise ApplicationError(
                    f"The answer to {answer.interrupt.id} does not fit {self.response}: {error}",
                    type=ErrorCode.AGENT_FAILED.value,
                    non_retryable=True,
                ) from error
        return Reply(
            answer.interrupt,
            answer.status,
            value if answer.resolved else None,
            answer.decided_by,
            answer.permit,
        )


@dataclass(frozen=True)
class Reply(Generic[T]):
    """A person's answer to an :class:`Ask`."""

    interrupt: Interrupt
    status: AnswerStatus
    """``resolved``, ``cancelled``, or ``expired`` (nobody answered in time)."""
    value: T | None
    """The answer, of the ask's ``response`` type; ``None`` unless ``resolved``."""
    decided_by: list[str]
    """The principals whose decisions settled it (empty for an expiry)."""
    permit: Permit | None = None
    """For an approved tool call: the permit it runs under."""

    @property
    def resolved(self) -> bool:
        return self.status == "resolved"


TYPES_KEPT = 256
"""The most response types whose adapter and JSON Schema are kept: an agent's questions
name a handful (decision models are kept per tool, ``sdk.tools.decision_model``)."""


def json_schema(shape: dict[str, Any] | type | None) -> dict[str, Any] | None:
    """A JSON Schema given as such, or derived from a type by pydantic.

    Deriving it is most of the work of asking a question, and it depends on the type
    alone: it is derived once per type and kept, so a kept schema is the one a new
    derivation would give and the workflow stays deterministic. Each question gets a
    copy, as the interrupt it goes into may be changed.
    """
    if shape is None or isinstance(shape, dict):
        return shape
    try:
        return copy.deepcopy(_kept_schema(shape))
    except TypeError:  # an unhashable type form: derived each time
        return TypeAdapter(shape).json_schema()


def _adapter(shape: Any) -> TypeAdapter[Any]:
    """Pydantic's adapter of ``shape``, kept per type as :func:`json_schema`'s are."""
    try:
        return _kept_adapter(shape)
    except TypeError:  # unhashable
        return TypeAdapter(shape)


@functools.lru_cache(maxsize=TYPES_KEPT)
def _kept_adapter(shape: Any) -> TypeAdapter[Any]:
    return TypeAdapter(shape)


@functools.lru_cache(maxsize=TYPES_KEPT)
def _kept_schema(shape: Any) -> dict[str, Any]:
    return _kept_adapter(shape).json_schema()


def _iso_utc(moment: datetime) -> str:
    """``2026-11-25T17:00:00Z``: ISO-8601 in UTC, as AG-UI's ``expiresAt`` expects."""
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")
