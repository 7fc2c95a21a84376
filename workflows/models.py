"""The pydantic models that cross the thread workflow's boundary.

Everything here travels through Temporal's pydantic data converter as camelCase JSON,
so fields may be added (with defaults) without breaking recorded histories.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from ag_ui.core import Event, Interrupt, Message, RunAgentInput
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel


class Model(BaseModel):
    """Base for the engine's own models: camelCase on the wire, like AG-UI's."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


RunStatus = Literal["running", "succeeded", "interrupted", "failed"]
ThreadStatus = Literal["idle", "running", "waiting"]


class RunRecord(Model):
    """One AG-UI run on the thread, as the thread remembers it."""

    key: str
    """The run's identity inside the thread: the id of the workflow update that carried
    it. A client may reuse a ``runId`` (CopilotKit does for resumes), so ``runId`` alone
    cannot name a run."""
    run_id: str
    status: RunStatus = "running"
    started_at: datetime
    finished_at: datetime | None = None
    first_seq: int
    """Sequence number of the run's first event."""
    last_seq: int = 0
    """Sequence number of the run's last event so far."""


class SequencedEvent(Model):
    """An AG-UI event with its position in the thread's event log."""

    seq: int
    run_key: str
    event: Event


class AppliedAnswer(Model):
    """An interrupt's answer as applied: the ledger that makes resumes idempotent."""

    interrupt_id: str
    status: Literal["resolved", "cancelled", "expired"]
    key: str
    """``(interruptId, status, payload)`` canonicalised (see ``interrupts.answer_key``)."""
    run_key: str
    """The run that applied it."""
    expires_at: str | None = None


class ThreadState(Model):
    """All mutable state of a thread: the one object continue-as-new carries."""

    thread_id: str
    agent: str
    messages: list[Message] = Field(default_factory=list)
    state: dict[str, Any] = Field(default_factory=dict)
    interrupts: list[Interrupt] = Field(default_factory=list)
    """The thread's open interrupts: a run that ends on them waits for their answers."""
    applied: dict[str, AppliedAnswer] = Field(default_factory=dict)
    """Every answer applied, by interrupt id."""
    runs: list[RunRecord] = Field(default_factory=list)
    events: list[SequencedEvent] = Field(default_factory=list)


class ThreadStart(Model):
    """The thread workflow's input."""

    thread_id: str
    agent: str
    state: ThreadState | None = None
    """Carried state when the thread continues as new; ``None`` for a new thread."""


class RunRequest(Model):
    """The ``run`` update's argument: one AG-UI run for the thread's agent."""

    agent: str
    input: RunAgentInput


class RunReply(Model):
    """What the ``run`` update returns once the run has ended: all its events."""

    run_key: str
    events: list[SequencedEvent]


class EventsQuery(Model):
    """Read a run's events after a sequence number (``after=0`` for all)."""

    run_key: str
    after: int = 0


class EventPage(Model):
    """A run's events after the requested sequence number."""

    events: list[SequencedEvent]
    ended: bool
    """Whether the run has emitted its terminal event."""


class ThreadView(Model):
    """The thread as ``GET /threads/{thread_id}`` shows it."""

    thread_id: str
    agent: str
    status: ThreadStatus
    messages: list[Message]
    state: dict[str, Any]
    interrupts: list[Interrupt]
    runs: list[RunRecord]
