"""What a thread and its sub-agents send each other (``workflows/subagent.py``).

A workflow cannot update another, only signal it, so the two talk in signals: the
thread starts a sub-agent run with :class:`SubagentStart`, the sub-agent reports with
:class:`SubagentReport`, and the thread hands it answers with :class:`SubagentAnswers`.
Signals are addressed by workflow id, so each reaches the other's latest run across the
continue-as-new both do while they wait.
"""

from __future__ import annotations

from typing import Literal

from ag_ui.core import Event, Message
from pydantic import Field

from workflows.models import Answer, Model, ThreadState
from workflows.questions import Question

SUBAGENT_REPORT = "subagent_report"
"""The thread's signal that carries a sub-agent's report."""
SUBAGENT_ANSWERS = "subagent_answers"
"""The sub-agent's signal that carries the answers to its questions."""
SUBAGENT_WORKFLOW_PREFIX = "agui-subagent-"
"""Sub-agent runs' workflow ids: ``agui-subagent-<thread id>-<agent>-<suffix>``."""

SubagentOutcome = Literal["working", "paused", "succeeded", "failed"]


class SubagentStart(Model):
    """The sub-agent workflow's input."""

    thread_workflow_id: str
    """The workflow of the thread it works for, which its reports go to."""
    thread_id: str
    owner: str
    agent: str
    subagent_run_id: str
    task: str
    """What it is asked to do: its conversation's first (user) message."""
    round: int = 0
    """How many sets of answers it has been handed: the next it waits for, once it
    carries a paused turn."""
    state: ThreadState | None = None
    """Its turn as data, carried across a continue-as-new; ``None`` at its start."""


class SubagentReport(Model):
    """What a sub-agent run did since its last report, in one round of work."""

    subagent_run_id: str
    round: int
    seq: int
    """The report's place in its round, from 0: the thread takes them in order."""
    events: list[Event] = Field(default_factory=list)
    """Its events, each marked with its ``subagentRunId``."""
    messages: list[Message] = Field(default_factory=list)
    """The messages it added to its conversation, marked likewise."""
    outcome: SubagentOutcome = "working"
    """``working``: more reports follow in this round; else how the round ended."""
    questions: list[Question] = Field(default_factory=list)
    """``paused``: what it asks, which the thread opens as its interrupts..."""
    interrupt_ids: list[str] = Field(default_factory=list)
    """...with these ids, which its paused turn waits on."""
    result: str | None = None
    """``succeeded``: its final answer."""
    error_code: str | None = None
    error: str | None = None
    """``failed``: the code and message of its error, as a run's ``RUN_ERROR`` has them."""


class SubagentAnswers(Model):
    """The answers to a paused sub-agent's questions, all of them."""

    round: int
    answers: list[Answer]
