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
from typing import Protocol

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from ag_ui.core import Event, Interrupt, Message, RunAgentInput

    from workflows.models import ModelDelta, ThreadState
    from workflows.questions import Question


class TurnHost(Protocol):
    """What a turn may do to its thread."""

    def emit(self, event: Event) -> None:
        """Append ``event`` to the event log of the run in progress."""
        ...

    def add_message(self, message: Message) -> None:
        """Add ``message`` to the conversation (once: a known id is skipped)."""
        ...

    def ask(self, questions: Sequence[Question]) -> list[Interrupt]:
        """Open interrupts for ``questions``: the run ends on them once the turn
        returns, and the turn's ``resume`` gets their answers, maybe days later.
        Returns them as the client sees them, ids included."""
        ...

    def listen(self, activity_id: str, listener: Callable[[ModelDelta], None] | None) -> None:
        """Route the streamed output of the model activity ``activity_id`` to
        ``listener`` (``None``: stop)."""
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
