"""A sub-agent run: a child workflow of its thread, holding one sub-agent's turn.

A thread's turn hands work to another agent (``AgentContext.delegate``: a sub-agent
tool, a graph's node) by starting this workflow. It runs the sub-agent's turn with the
same SDK, journal and budgets as a thread's, and reports to the thread as it goes
(``SUBAGENT_REPORT``, by workflow id): its events and messages, marked with its
``subagentRunId``, then how the round ended: done with its final answer, failed, or
paused on questions. The thread opens those as its own interrupts (with the ids given
here), so one resume answers every open interrupt of the thread, sub-agents' included,
with every rule of the contract checked in one place, the thread's.

Paused, it continues as new with its turn as data, as a waiting thread does, and waits
for the answers (``SUBAGENT_ANSWERS``), which the thread sends once a resume, decisions
or an expiry have answered them all; it then resumes its turn from the top, the steps
it took read back from its journal. Finished, it completes with its answer.

The thread starts it with parent close policy ``ABANDON``: the thread continues as new
after each run, which would otherwise end its children. The thread cancels the sub-agent
runs it no longer waits on, and a sub-agent whose thread is gone ends when it next
reports.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import TypeVar

from temporalio import workflow
from temporalio.exceptions import ApplicationError, FailureError, TemporalError

with workflow.unsafe.imports_passed_through():
    from ag_ui.core import (
        AssistantMessage,
        Event,
        Interrupt,
        Message,
        RunAgentInput,
        UserMessage,
    )
    from pydantic import BaseModel

    import workflows.served as served
    from workflows import budgets, versioning
    from workflows.errors import ErrorCode
    from workflows.failures import failure
    from workflows.model_streams import ModelStreams
    from workflows.models import STREAM_SIGNAL, ModelDelta, ThreadState
    from workflows.questions import Question
    from workflows.subagent_models import (
        SUBAGENT_ANSWERS,
        SUBAGENT_REPORT,
        SubagentAnswers,
        SubagentOutcome,
        SubagentReport,
        SubagentStart,
    )
    from workflows.turn import SubagentHost, Turn


_Marked = TypeVar("_Marked", bound=BaseModel)


@workflow.defn
class SubagentWorkflow:
    """One sub-agent run of a thread (see the module's docstring).

    Signals:
        subagent_answers(SubagentAnswers): the answers to its questions.
        upgrade(): continue as new on the deployment's current build if waiting for
            answers (``workflows/versioning.py``).
        model_stream(ModelDelta): its model activity's output so far.
    """

    @workflow.init
    def __init__(self, start: SubagentStart) -> None:
        self._start = start
        self._thread = start.state or ThreadState(
            thread_id=start.subagent_run_id,
            agent=start.agent,
            owner=start.owner,
            messages=[UserMessage(id=f"{start.subagent_run_id}-task", content=start.task)],
        )
        self._answers: dict[int, SubagentAnswers] = {}
        self._upgrade = False
        self._streams = ModelStreams()
        self._report = self._new_report(start.round, seq=0)
        """What the round did since its last report."""
        self._sending: asyncio.Task[None] | None = None
        self._gone = False
        """The thread no longer takes reports: it has ended."""
        self._event_bytes = 0

    @workflow.run
    async def run(self, start: SubagentStart) -> str | None:
        """Work rounds until the sub-agent answers (its answer) or fails (``None``)."""
        round_ = start.round
        agent = served.find(workflow.info().task_queue, start.agent)
        while True:
            self._report = self._new_report(round_, seq=0)
            self._event_bytes = 0
            if agent is None:
                await self._end_round("failed", error=served.not_served(start.agent))
                return None
            turn = Turn(self._input(round_), self._thread, self)
            if round_ == 0:
                self._show("working")
                work = agent.run(turn)
            else:
                self._show(f"waiting for the answers to {len(self._asked())} question(s)")
                await workflow.wait_condition(
                    lambda: round_ in self._answers or self._upgrade  # noqa: B023
                )
                if round_ not in self._answers:
                    workflow.continue_as_new(
                        self._start, initial_versioning_behavior=versioning.next_run_behavior()
                    )
                self._show("working")
                work = agent.resume(turn, self._answers.pop(round_).answers)
            try:
                await work
            except Exception as error:
                if isinstance(error, TemporalError) and not isinstance(error, FailureError):
                    raise  # Temporal's own (nondeterminism): the workflow task must fail.
                await self._end_round("failed", error=error)
                return None
            if not self._report.questions:
                answer = _final_answer(self._thread.messages)
                await self._end_round("succeeded", result=answer)
                return answer
            await self._end_round("paused")
            if self._gone:
                return None
            round_ += 1
            if round_ not in self._answers:
                if workflow.cancellation_reason() is not None:
                    # Cancelled (its thread reaped it) as the round ended: the cancel
                    # reaches this coroutine only after it ran on, and a continue-as-new
                    # would drop it.
                    raise asyncio.CancelledError
                self._show(f"waiting for the answers to {len(self._asked())} question(s)")
                workflow.continue_as_new(
                    self._start.model_copy(update={"round": round_, "state": self._thread}),
                    initial_versioning_behavior=versioning.next_run_behavior(),
                )

    @workflow.signal(name=SUBAGENT_ANSWERS)
    def subagent_answers(self, answers: SubagentAnswers) -> None:
        """The answers to the questions of the round before ``answers.round``."""
        self._answers[answers.round] = answers

    @workflow.signal(name=versioning.UPGRADE_SIGNAL)
    def upgrade(self) -> None:
        """Continue as new on the deployment's current build if waiting for answers."""
        self._upgrade = True

    @workflow.signal(name=STREAM_SIGNAL)
    def model_stream(self, delta: ModelDelta) -> None:
        """Its model activity's output so far (``activities.chat.DeltaSender``)."""
        error = self._streams.deliver(delta)
        if error is not None:
            # Over its budget: the round fails once the model's activity returns
            # (``emit`` raises again).
            workflow.logger.warning("streamed sub-agent output dropped", exc_info=error)

    # --- TurnHost -------------------------------------------------------------------

    def emit(self, event: Event) -> None:
        """Report ``event``, marked as the sub-agent's, within a run's event budget."""
        marked = _marked(event, self._start.subagent_run_id)
        self._event_bytes += budgets.json_size(marked)
        budgets.check_run_events(self._event_bytes)
        self._report.events.append(marked)
        self._send_soon()

    def add_message(self, message: Message) -> None:
        """Add ``message`` to its conversation (once) and report it."""
        if any(known.id == message.id for known in self._thread.messages):
            return
        budgets.check_message(budgets.json_size(message))
        # Its own conversation, as its model reads it; the thread's copy is marked.
        self._thread.messages.append(message)
        self._report.messages.append(_marked(message, self._start.subagent_run_id))
        self._send_soon()

    def ask(
        self,
        questions: Sequence[Question],
        subagent_run_id: str | None = None,
        ids: Sequence[str] | None = None,
    ) -> list[Interrupt]:
        """Ask through the thread: the round pauses, and the thread opens the questions
        as its interrupts, with the ids given here, once the round has been reported."""
        agent = served.agent(workflow.info().task_queue, self._start.agent)
        asked = len(self._report.questions)
        budgets.check_questions(questions, asked, agent.remind_before, workflow.now())
        interrupts = []
        for question in questions:
            interrupt_id = f"int-{workflow.uuid4()}"
            # Its own defaults and tools, which the thread does not know.
            own = question.model_copy(
                update={
                    "remind_before": question.remind_before
                    if question.remind_before is not None
                    else list(agent.remind_before),
                    "call": question.call.model_copy(update={"agent": agent.name})
                    if question.call is not None
                    else None,
                }
            )
            self._report.questions.append(own)
            self._report.interrupt_ids.append(interrupt_id)
            interrupts.append(
                own.interrupt(interrupt_id).model_copy(
                    update={"subagent_run_id": self._start.subagent_run_id}
                )
            )
        return interrupts

    def listen(self, activity_id: str, listener: Callable[[ModelDelta], None] | None) -> None:
        """Route its model activity's streamed output (``None``: stop)."""
        self._streams.listen(activity_id, listener)

    @property
    def subagents(self) -> SubagentHost:
        """Sub-agents of a sub-agent are not supported: its turn fails if it delegates."""
        raise ApplicationError(
            "A sub-agent cannot hand work to sub-agents of its own.",
            type=ErrorCode.AGENT_FAILED.value,
            non_retryable=True,
        )

    # --- reporting ------------------------------------------------------------------

    def _new_report(self, round_: int, seq: int) -> SubagentReport:
        return SubagentReport(subagent_run_id=self._start.subagent_run_id, round=round_, seq=seq)

    def _send_soon(self) -> None:
        """Send what the round did so far, unless a report is on its way (what comes
        meanwhile goes in the next): the thread streams it on as it arrives."""
        if self._sending is None or self._sending.done():
            self._sending = asyncio.create_task(self._send_working())

    async def _send_working(self) -> None:
        while not self._gone and (self._report.events or self._report.messages):
            await self._send(self._take_report())

    def _take_report(self) -> SubagentReport:
        report = self._report
        self._report = self._new_report(report.round, report.seq + 1)
        return report

    async def _end_round(
        self,
        outcome: SubagentOutcome,
        result: str | None = None,
        error: BaseException | None = None,
    ) -> None:
        """Report how the round ended, after everything it reported before."""
        if self._sending is not None:
            await self._sending
        report = self._take_report()
        report.outcome = outcome
        report.result = result
        if error is not None:
            report.questions, report.interrupt_ids = [], []
            report.error_code, report.error = failure(error)
        await self._send(report)

    async def _send(self, report: SubagentReport) -> None:
        if self._gone:
            return
        thread = workflow.get_external_workflow_handle(self._start.thread_workflow_id)
        try:
            await thread.signal(SUBAGENT_REPORT, report)
        except Exception as error:
            if isinstance(error, TemporalError) and not isinstance(error, FailureError):
                raise
            # The thread has ended (terminated, deleted): nobody waits for this run.
            workflow.logger.warning("the sub-agent's thread is gone", exc_info=error)
            self._gone = True

    def _input(self, round_: int) -> RunAgentInput:
        """The input its turn sees: no client sent it one."""
        return RunAgentInput(
            thread_id=self._start.subagent_run_id,
            run_id=f"{self._start.subagent_run_id}-{round_}",
            state=self._thread.state,
            messages=[],
            tools=[],
            context=[],
            forwarded_props={},
        )

    def _asked(self) -> list[str]:
        """The interrupts its paused turn waits on."""
        scopes = self._thread.journal.scopes.values()
        return [i for steps in scopes for s in steps if s.answers is None for i in s.interrupt_ids]

    def _show(self, doing: str) -> None:
        """Say in the Web UI what it does (its current details)."""
        start = self._start
        workflow.set_current_details(
            f"Sub-agent {start.agent} of thread {start.thread_id}: {doing}."
        )


def _marked(item: _Marked, subagent_run_id: str) -> _Marked:
    """``item`` marked as the sub-agent's, where its type has the field."""
    if "subagent_run_id" not in type(item).model_fields:
        return item
    return item.model_copy(update={"subagent_run_id": subagent_run_id})


def _final_answer(messages: Sequence[Message]) -> str:
    """Its answer: the text of its conversation's last assistant message."""
    for message in reversed(messages):
        if isinstance(message, AssistantMessage) and message.content:
            return message.content
    return ""
