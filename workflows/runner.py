"""The worker's workflow runner: Temporal's, with workflow code kept from running at a
workflow task's time that has passed (:class:`StaleTimeGuard`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from temporalio.bridge.proto.workflow_activation import WorkflowActivation
from temporalio.bridge.proto.workflow_completion import WorkflowActivationCompletion
from temporalio.converter import SerializationContext, StorageDriverStoreContext
from temporalio.worker import WorkflowInstance, WorkflowInstanceDetails, WorkflowRunner
from temporalio.workflow import Info

if TYPE_CHECKING:
    # The type of an argument the SDK passes through, not exported elsewhere.
    from temporalio.worker._command_aware_visitor import CommandInfo
    from temporalio.workflow import _Definition

STALE_TIME = "history events reached the workflow at an earlier workflow task's time"
"""The failure of an activation :class:`StaleTimeGuard` refuses: a read of the thread
that met one fails, and is asked again."""

_READ_ONLY_JOBS = frozenset({"query_workflow", "remove_from_cache"})


class StaleTimeGuard(WorkflowInstance):
    """A workflow instance that refuses to apply history events at an earlier workflow
    task's time.

    A worker that has not cached a thread answers a query sent while no workflow task
    was pending by replaying the thread's history, and that history can by then hold
    events that came after the query was sent: a signal, an activity's result. The
    Python SDK's core applies them too, in an activation of its own, at the time of the
    last workflow task (``workflow.now()`` does not move without a new task), answers
    the query from that state, and may keep it for the workflow task that then takes
    those events. So a thread would log events stamped seconds early, and a stream
    reading it would send them while a later replay of the same history stamps them at
    the task's real time (``docs/operations.md``, "A read while a worker takes a thread
    over").

    The activations of real workflow tasks each carry a task's time and its started
    event as the history's length, and a later one moves both. An activation that
    lengthens the history and keeps the time is that query's: its failure fails the
    query (the reader asks again) and evicts the thread, so the workflow task that
    takes the events replays the history and applies them at its own time.
    """

    def __init__(self, inner: WorkflowInstance) -> None:
        self._inner = inner
        self._last: tuple[int, int] | None = None
        """The time (ns) and history length of the last activation that applied
        history events."""

    def activate(self, act: WorkflowActivation) -> WorkflowActivationCompletion:
        if all(job.WhichOneof("variant") in _READ_ONLY_JOBS for job in act.jobs):
            return self._inner.activate(act)
        current = (act.timestamp.ToNanoseconds(), act.history_length)
        last = self._last
        if last is not None and current[0] == last[0] and current[1] > last[1]:
            refused = WorkflowActivationCompletion(run_id=act.run_id)
            refused.failed.failure.message = STALE_TIME
            return refused
        self._last = current
        return self._inner.activate(act)

    def get_serialization_context(
        self, command_info: CommandInfo | None
    ) -> SerializationContext | None:
        return self._inner.get_serialization_context(command_info)

    def get_external_store_context(
        self, command_info: CommandInfo | None
    ) -> StorageDriverStoreContext:
        return self._inner.get_external_store_context(command_info)

    def get_info(self) -> Info:
        return self._inner.get_info()


class GuardedRunner(WorkflowRunner):
    """``runner``, each of its workflow instances in a :class:`StaleTimeGuard`."""

    def __init__(self, runner: WorkflowRunner) -> None:
        self._runner = runner

    def prepare_workflow(self, defn: _Definition) -> None:
        self._runner.prepare_workflow(defn)

    def create_instance(self, det: WorkflowInstanceDetails) -> WorkflowInstance:
        return StaleTimeGuard(self._runner.create_instance(det))

    def set_worker_level_failure_exception_types(
        self, types: Sequence[type[BaseException]]
    ) -> None:
        self._runner.set_worker_level_failure_exception_types(types)
