"""How an agent turn waits for days without a coroutine waiting that long.

A turn that reaches an interrupt stops (:class:`Suspend`) and the run ends on it. When
every interrupt is answered the turn runs again from the top, and each step it already
took (a model reply, a tool's outcome, a message it said, the interrupt itself) is read
back from the thread's :class:`~workflows.models.Journal` instead of being taken again.
So between runs the thread holds only data: it can continue as new, and the worker can
be upgraded, while a turn is paused, which a coroutine parked on a promise would forbid.
It is Strands' and Genkit's rule ("a hook or tool runs again on resume and gets its
answer") applied to the whole turn, with every effect that goes through the context
recorded once.

Steps are recorded per *scope*: the turn is one, and each piece of work run
concurrently (a tool call of a batch) is a child scope, so concurrent work records in
its own order, and a child that finished is not run again at all.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from temporalio.exceptions import ApplicationError

    from workflows.errors import ErrorCode
    from workflows.models import Journal, JournalStep

FINISHED = "finished"
"""The kind of a scope's last step once it has returned; its value is what it returned."""


class Suspend(BaseException):
    """Unwinds a turn that waits on interrupts; the SDK catches it at the turn's top.

    A ``BaseException``, like ``asyncio.CancelledError``, so that agent code catching
    ``Exception`` does not swallow it.
    """


class Scope:
    """The steps of one sequential piece of a turn, replayed in order, then extended.

    Args:
        journal: The thread's journal, where the steps are kept.
        path: The scope's name, unique in the turn (``turn``, ``turn/3.tc-…``).
    """

    def __init__(self, journal: Journal, path: str) -> None:
        self.path = path
        self._journal = journal
        self.steps = journal.scopes.setdefault(path, [])
        self._position = 0

    def recorded(self, kind: str) -> JournalStep | None:
        """The next step, if this scope took it already (it must be of ``kind``).

        Raises:
            ApplicationError: The code took a different step here last time, e.g. it
                was changed in a way that breaks paused turns.
        """
        position = self._position
        self._position += 1
        if position >= len(self.steps):
            return None
        step = self.steps[position]
        if step.kind != kind:
            raise ApplicationError(
                f"The agent's turn changed while it was paused: step {position} of "
                f"{self.path} was {step.kind!r}, now {kind!r}.",
                type=ErrorCode.AGENT_FAILED.value,
                non_retryable=True,
            )
        return step

    def next_kind(self) -> str | None:
        """The kind of the next step, if this scope took it already (nothing is read)."""
        if self._position >= len(self.steps):
            return None
        return self.steps[self._position].kind

    def step_value(self, kind: str) -> Any:
        """The value of the next step, which this scope took already (it must have)."""
        step = self.recorded(kind)
        assert step is not None, "step_value reads only a step next_kind found"
        return step.value

    def record(self, kind: str, value: Any = None, interrupt_ids: list[str] | None = None) -> None:
        """Record the step just taken (the one :meth:`recorded` found missing)."""
        assert len(self.steps) == self._position - 1, "a step is recorded right after it is taken"
        self.steps.append(JournalStep(kind=kind, value=value, interrupt_ids=interrupt_ids or []))

    def once(self, kind: str, effect: Callable[[], object]) -> None:
        """Take the next step, an effect with nothing to remember, unless it was taken."""
        if self.recorded(kind) is None:
            effect()
            self.record(kind)

    async def step(self, kind: str, take: Callable[[], Awaitable[Any]]) -> Any:
        """The value of the next step: recorded, or taken now (``take``) and recorded."""
        step = self.recorded(kind)
        if step is not None:
            return step.value
        value = await take()
        self.record(kind, value)
        return value

    def child(self, key: str) -> Scope:
        """The scope of a piece of work this scope runs concurrently with others."""
        return Scope(self._journal, f"{self.path}/{self._position}.{key}")

    def finished(self) -> JournalStep | None:
        """The step recording what this scope returned, if it has returned."""
        if self.steps and self.steps[-1].kind == FINISHED:
            return self.steps[-1]
        return None

    def finish(self, value: Any) -> None:
        self.steps.append(JournalStep(kind=FINISHED, value=value))


def answer(journal: Journal, answers: dict[str, Any]) -> None:
    """Attach answers (by interrupt id) to the ``interrupts`` steps they complete."""
    for steps in journal.scopes.values():
        for step in steps:
            ids = step.interrupt_ids
            if ids and step.answers is None and all(i in answers for i in ids):
                step.answers = [answers[interrupt_id] for interrupt_id in ids]
