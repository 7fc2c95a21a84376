"""The boundary between the thread and an agent's turn.

The thread starts a turn with a :class:`Turn`: the run's input, the thread's data, and
the thread itself as a :class:`TurnHost`, the one way agent code changes a thread. A
turn never touches the workflow: the thread's event log, conversation and interrupts
stay consistent whatever the agent does, and the SDK (``workflows.sdk``) is the only
code on the other side.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from ag_ui.core import Event, Interrupt, Message, RunAgentInput

    from workflows.models import Answer, ModelDelta, ThreadState
    from workflows.questions import Question

if TYPE_CHECKING:
    from workflows.subagent_models import SubagentReport


class TurnHost(Protocol):
    """What a turn may do to its thread."""

    def emit(self, event: Event) -> None:
        """Append ``event`` to the event log of the run in progress."""
        ...

    def add_message(self, message: Message) -> None:
        """Add ``message`` to the conversation (once: a known id is skipped)."""
        ...

    def ask(
        self,
        questions: Sequence[Question],
        subagent_run_id: str | None = None,
        ids: Sequence[str] | None = None,
    ) -> list[Interrupt]:
        """Open interrupts for ``questions``: the run ends on them once the turn
        returns, and the turn's ``resume`` gets their answers, maybe days later.
        Returns them as the client sees them, ids included.

        A sub-agent's questions name it (``subagent_run_id``) and come with the ids
        it gave them (``ids``); otherwise the host gives the ids.
        """
        ...

    @property
    def subagents(self) -> SubagentHost:
        """The turn's sub-agents (``workflows/subagent.py``)."""
        ...

    def listen(self, activity_id: str, listener: Callable[[ModelDelta], None] | None) -> None:
        """Route the streamed output of the model activity ``activity_id`` to
        ``listener`` (``None``: stop)."""
        ...


class SubagentHost(Protocol):
    """What a turn may do with sub-agents: each runs as a child workflow of the thread,
    which reports to the thread as it works (``workflows/delegation.py``)."""

    def new_id(self, agent: str) -> str:
        """A new sub-agent run's ``subagentRunId`` (its child workflow's id)."""
        ...

    async def start(self, subagent_run_id: str, agent: str, task: str) -> None:
        """Start sub-agent run ``subagent_run_id`` of ``agent`` on ``task``."""
        ...

    async def report(self, subagent_run_id: str, round_: int) -> SubagentReport:
        """The sub-agent run's next report of its ``round_``-th round (its events so far,
        or how the round ended), waiting for it."""
        ...

    async def answer(self, subagent_run_id: str, round_: int, answers: list[Answer]) -> None:
        """Hand the sub-agent run the answers to its questions: its ``round_``-th round."""
        ...

    def announce(
        self, subagent_run_id: str, agent: str, description: str, tool_call_id: str | None
    ) -> None:
        """Emit ``SUBAGENT_STARTED`` for it, unless the run in progress has already."""
        ...

    def finish(self, subagent_run_id: str, result: str) -> None:
        """Emit ``SUBAGENT_FINISHED``: done, with its answer."""
        ...

    def fail(self, subagent_run_id: str, code: str, message: str) -> None:
        """Emit ``SUBAGENT_ERROR``."""
        ...


@dataclass(frozen=True)
class Turn:
    """One agent turn, as the thread starts it.

    Args:
        input: The input of the run the turn (re)starts in; for a run no client sent (an
            expiry's, an operator's), one with the thread's state and no messages.
        thread: The thread's data: ``messages`` (read-only: add through the host),
            ``state`` and ``memory`` (mutated in place), the paused turn's ``journal``.
        host: The thread, for everything with an effect on it.
    """

    input: RunAgentInput
    thread: ThreadState
    host: TurnHost
