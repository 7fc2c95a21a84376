"""The thread's side of its sub-agents: starting them, taking their reports, answering
them, and ending the ones it no longer waits on.

Each sub-agent run is a child workflow (``workflows/subagent.py``); the thread keeps a
:class:`~workflows.models.SubagentRecord` of it (``GET /threads/{id}`` lists them) and
the wire's lifecycle events for it in each run: ``SUBAGENT_STARTED`` when the run starts
or resumes it, ``SUBAGENT_FINISHED`` when it answers, or when the run ends on what it
asked (outcome ``suspended``, with its interrupts), ``SUBAGENT_ERROR`` when it fails or
the run fails around it. Reports arrive as signals; a
turn awaits them in order (:meth:`Delegation.report`), so the run's events are the
sub-agent's, in its order, wherever the signals interleave.
"""

from __future__ import annotations

from collections.abc import Callable

from temporalio import workflow
from temporalio.exceptions import FailureError, TemporalError
from temporalio.workflow import ParentClosePolicy

with workflow.unsafe.imports_passed_through():
    from ag_ui.core import (
        Event,
        SubagentErrorEvent,
        SubagentFinishedEvent,
        SubagentFinishedSuccessOutcome,
        SubagentFinishedSuspendedOutcome,
        SubagentStartedEvent,
    )

    from workflows import budgets
    from workflows.errors import ErrorCode
    from workflows.models import Answer, SubagentRecord, SubagentStatus, ThreadState
    from workflows.subagent_models import (
        SUBAGENT_ANSWERS,
        SUBAGENT_WORKFLOW_PREFIX,
        SubagentAnswers,
        SubagentReport,
        SubagentStart,
    )

LIVE: frozenset[SubagentStatus] = frozenset({"running", "waiting"})
STATUS_AFTER: dict[str, SubagentStatus] = {
    "paused": "waiting",
    "succeeded": "succeeded",
    "failed": "failed",
}
"""A sub-agent run's status once a round ended so."""
SUBAGENT_ID_CHARS = 12
"""Hex digits of the random suffix that makes a sub-agent run's id unique in its thread."""


class Delegation:
    """The sub-agents of one thread (``TurnHost.subagents``).

    Args:
        thread: The thread's state, whose ``subagents`` it keeps.
        emit: Appends one of the thread's own events to the run in progress.
    """

    def __init__(self, thread: ThreadState, emit: Callable[[Event], None]) -> None:
        self._thread = thread
        self._emit = emit
        self._inbox: dict[str, list[SubagentReport]] = {}
        """Reports received, by sub-agent run, of the runs a turn waits on."""
        self._open: set[str] = set()
        """Sub-agent runs the run in progress started and has not finished yet."""
        self._asked: dict[str, list[str]] = {}
        """The interrupts each sub-agent (or a hook before it) asked in the run in
        progress."""
        self._next_seq: dict[tuple[str, int], int] = {}
        """The ``seq`` of the report each round of each sub-agent run awaits next."""

    def new_run(self) -> None:
        """Forget the run before's lifecycle events: each run announces its own."""
        self._open.clear()
        self._asked.clear()

    def receive(self, report: SubagentReport) -> None:
        """Take a report (the ``subagent_report`` signal) for the turn that waits on it;
        one nobody waits on (of a sub-agent run the thread ended) is dropped."""
        inbox = self._inbox.get(report.subagent_run_id)
        if inbox is None:
            workflow.logger.warning(
                "report of a sub-agent run nobody waits on dropped",
                extra={"subagent_run_id": report.subagent_run_id},
            )
            return
        inbox.append(report)

    def asked(self, subagent_run_id: str, interrupt_ids: list[str]) -> None:
        """Note interrupts asked for ``subagent_run_id`` (``ThreadWorkflow.ask``)."""
        self._asked.setdefault(subagent_run_id, []).extend(interrupt_ids)

    # --- SubagentHost ---------------------------------------------------------------

    def new_id(self, agent: str) -> str:
        suffix = workflow.uuid4().hex[:SUBAGENT_ID_CHARS]
        return f"{SUBAGENT_WORKFLOW_PREFIX}{self._thread.thread_id}-{agent}-{suffix}"

    async def start(self, subagent_run_id: str, agent: str, task: str) -> None:
        if budgets.json_size(task) > budgets.MAX_SUBAGENT_TASK_BYTES:
            raise budgets.output_too_large(
                f"A task for sub-agent {agent} is over {budgets.MAX_SUBAGENT_TASK_BYTES} bytes."
            )
        self._inbox[subagent_run_id] = []
        self._record(
            SubagentRecord(subagent_run_id=subagent_run_id, agent=agent, started_at=workflow.now())
        )
        thread = self._thread
        await workflow.start_child_workflow(
            "SubagentWorkflow",
            SubagentStart(
                thread_workflow_id=workflow.info().workflow_id,
                thread_id=thread.thread_id,
                owner=thread.owner,
                agent=agent,
                subagent_run_id=subagent_run_id,
                task=task,
            ),
            id=subagent_run_id,
            # The thread continues as new after its runs; that must not end its children.
            parent_close_policy=ParentClosePolicy.ABANDON,
            static_summary=f"Sub-agent {agent} of thread {thread.thread_id}",
        )

    async def report(self, subagent_run_id: str, round_: int) -> SubagentReport:
        inbox = self._inbox.setdefault(subagent_run_id, [])
        seq = self._next_seq.get((subagent_run_id, round_), 0)
        await workflow.wait_condition(
            lambda: any(r.round == round_ and r.seq == seq for r in inbox)
        )
        report = next(r for r in inbox if r.round == round_ and r.seq == seq)
        inbox.remove(report)
        self._next_seq[(subagent_run_id, round_)] = seq + 1
        if report.outcome != "working":
            del self._inbox[subagent_run_id]
            status = STATUS_AFTER[report.outcome]
            self._set_status(subagent_run_id, status)
        return report

    async def answer(self, subagent_run_id: str, round_: int, answers: list[Answer]) -> None:
        self._inbox[subagent_run_id] = []
        self._set_status(subagent_run_id, "running")
        handle = workflow.get_external_workflow_handle(subagent_run_id)
        await handle.signal(SUBAGENT_ANSWERS, SubagentAnswers(round=round_, answers=answers))

    def announce(
        self, subagent_run_id: str, agent: str, description: str, tool_call_id: str | None
    ) -> None:
        if subagent_run_id in self._open:
            return
        self._open.add(subagent_run_id)
        self._emit(
            SubagentStartedEvent(
                subagent_run_id=subagent_run_id,
                name=agent,
                description=description or None,
                parent_tool_call_id=tool_call_id,
            )
        )

    def finish(self, subagent_run_id: str, result: str) -> None:
        if subagent_run_id not in self._open:
            return
        self._open.discard(subagent_run_id)
        self._emit(
            SubagentFinishedEvent(
                subagent_run_id=subagent_run_id,
                result=result,
                outcome=SubagentFinishedSuccessOutcome(type="success"),
            )
        )

    def fail(self, subagent_run_id: str, code: str, message: str) -> None:
        if subagent_run_id not in self._open:
            return
        self._open.discard(subagent_run_id)
        self._emit(SubagentErrorEvent(subagent_run_id=subagent_run_id, message=message, code=code))

    # --- the thread's bookkeeping ---------------------------------------------------

    def end_run(self, interrupted: bool) -> None:
        """Close the lifecycle of the sub-agents the run leaves open, before its
        terminal event: suspended ones that asked in a run that ends on interrupts,
        else (the run failed around them) with ``SUBAGENT_ERROR``.

        Only here: until the run ends, what they asked may yet be withdrawn (a sibling
        fails the turn), and a client must not read of interrupts the run never opens.
        """
        for subagent_run_id in sorted(self._open):
            asked = self._asked.get(subagent_run_id)
            if interrupted and asked:
                self._open.discard(subagent_run_id)
                outcome = SubagentFinishedSuspendedOutcome(type="suspended", interrupt_ids=asked)
                self._emit(SubagentFinishedEvent(subagent_run_id=subagent_run_id, outcome=outcome))
            else:
                self.fail(
                    subagent_run_id,
                    ErrorCode.AGENT_FAILED,
                    "The run ended before the sub-agent did.",
                )

    async def reap(self) -> None:
        """Cancel the live sub-agent runs the paused turn does not wait on: their turn
        ended without them (it failed, or what it asked was withdrawn). Between runs only.

        A sub-agent run waits on every interrupt its turn asked, open or answered: one
        answered already (expired, or settled by decisions) while others are still open
        gets its answer once they all are, when the turn resumes.
        """
        waited_on = {i.subagent_run_id for i in self._thread.asked}
        for record in self._thread.subagents:
            if record.status in LIVE and record.subagent_run_id not in waited_on:
                await self._cancel(record)

    async def cancel_all(self) -> None:
        """Cancel every live sub-agent run: the thread itself was cancelled."""
        for record in self._thread.subagents:
            if record.status in LIVE:
                await self._cancel(record)

    async def _cancel(self, record: SubagentRecord) -> None:
        record.status, record.finished_at = "cancelled", workflow.now()
        self._inbox.pop(record.subagent_run_id, None)
        handle = workflow.get_external_workflow_handle(record.subagent_run_id)
        try:
            await handle.cancel()
        except Exception as error:
            if isinstance(error, TemporalError) and not isinstance(error, FailureError):
                raise
            # Ended already (it failed, or was terminated): nothing left to cancel.
            workflow.logger.info("sub-agent run already ended", exc_info=error)

    def _record(self, record: SubagentRecord) -> None:
        records = self._thread.subagents
        records.append(record)
        ended = [r for r in records if r.status not in LIVE]
        for old in ended[: max(len(ended) - budgets.SUBAGENTS_KEPT, 0)]:
            records.remove(old)

    def _set_status(self, subagent_run_id: str, status: SubagentStatus) -> None:
        record = next(
            (r for r in self._thread.subagents if r.subagent_run_id == subagent_run_id), None
        )
        if record is None:
            return
        record.status = status
        if status not in LIVE:
            record.finished_at = workflow.now()
