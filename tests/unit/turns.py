"""A turn without a workflow: an :class:`AgentContext` over a thread held in memory, for
the SDK's unit tests.

The SDK reaches the workflow through four calls (``workflow.now``, ``uuid4``,
``execute_activity``, ``execute_local_activity``); :func:`offline` stands in for them,
running a tool's activity function in the test's own event loop, as a worker would run it.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest
from ag_ui.core import Event, Interrupt, Message, RunAgentInput
from temporalio import workflow

from workflows.models import Answer, ModelDelta, ThreadState
from workflows.questions import Question
from workflows.sdk import AgentContext, AgentDefinition
from workflows.sdk.journal import Scope, Suspend, answer
from workflows.turn import SubagentHost, Turn

NOW = datetime(2026, 11, 24, 9, tzinfo=UTC)


@dataclass
class Host:
    """The thread's side of a turn (``TurnHost``), recording what the turn did."""

    events: list[Event] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)

    def emit(self, event: Event) -> None:
        self.events.append(event)

    def add_message(self, message: Message) -> None:
        self.messages.append(message)

    def ask(
        self,
        questions: Sequence[Question],
        subagent_run_id: str | None = None,
        ids: Sequence[str] | None = None,
    ) -> list[Interrupt]:
        first = len(self.questions) + 1
        self.questions.extend(questions)
        ids = ids or [f"int-{first + i}" for i in range(len(questions))]
        return [q.interrupt(i) for q, i in zip(questions, ids, strict=True)]

    def listen(self, activity_id: str, listener: Callable[[ModelDelta], None] | None) -> None:
        """Nothing streams: the turns of these tests run no model."""

    @property
    def subagents(self) -> SubagentHost:
        """The turns of these tests hand no work to sub-agents."""
        raise NotImplementedError


@dataclass
class Thread:
    """A thread in memory: its state, and the host its turns act on."""

    agent: AgentDefinition
    host: Host = field(default_factory=Host)
    state: ThreadState = field(
        default_factory=lambda: ThreadState(thread_id="t-1", agent="test", owner="alice")
    )

    async def turn(self, work: Callable[[AgentContext], Awaitable[Any]]) -> Any:
        """Run ``work`` as (the rest of) a turn; ``Suspend`` propagates when it waits."""
        run_input = RunAgentInput(
            thread_id=self.state.thread_id,
            run_id="r-1",
            state={},
            messages=[],
            tools=[],
            context=[],
            forwarded_props=None,
        )
        turn = Turn(input=run_input, thread=self.state, host=self.host)
        ctx = AgentContext(turn, Scope(self.state.journal, "turn"), self.agent)
        return await work(ctx)

    async def asked(self, work: Callable[[AgentContext], Awaitable[Any]]) -> list[Question]:
        """The questions ``work`` waits on, as the thread received them."""
        before = len(self.host.questions)
        with pytest.raises(Suspend):
            await self.turn(work)
        return self.host.questions[before:]

    def answer(self, *answers: Answer) -> None:
        """Hand the turn its answers, as the thread does before it resumes the turn."""
        answer(self.state.journal, {a.interrupt.id: a for a in answers})


def offline(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Stand in for the workflow calls the SDK makes, outside a workflow; returns the
    inputs activities are started with, in order, as they are."""
    ids = itertools.count()
    started: list[Any] = []
    monkeypatch.setattr(workflow, "now", lambda: NOW)
    monkeypatch.setattr(workflow, "uuid4", lambda: uuid.UUID(int=next(ids)))

    async def execute(activity: Callable[[Any], Awaitable[Any]], arg: Any, **_: Any) -> Any:
        started.append(arg)
        return await activity(arg)

    monkeypatch.setattr(workflow, "execute_activity", execute)
    monkeypatch.setattr(workflow, "execute_local_activity", execute)
    return started
