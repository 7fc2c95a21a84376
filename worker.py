"""Run the engine's Temporal worker: the thread workflow, serving the example agents
(``workflows.agents.EXAMPLES``), and their activities.

``python worker.py`` connects with the environment's Temporal settings (see
``settings.py``), registers the engine's search attributes if the namespace lacks them,
and polls the task queue until SIGINT or SIGTERM, then drains in-flight tasks and exits.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import timedelta
from typing import Any, NoReturn

import uvloop
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import (
    AddSearchAttributesRequest,
    ListSearchAttributesRequest,
)
from temporalio.api.workflowservice.v1 import (
    DescribeWorkerDeploymentRequest,
    SetWorkerDeploymentCurrentVersionRequest,
)
from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleAlreadyRunningError,
    ScheduleIntervalSpec,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
    ScheduleUpdate,
    ScheduleUpdateInput,
)
from temporalio.common import SearchAttributeKey, VersioningBehavior, WorkerDeploymentVersion
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import (
    Replayer,
    UnsandboxedWorkflowRunner,
    Worker,
    WorkerDeploymentConfig,
    WorkflowRunner,
)
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

import logs
import tracing
from activities.erasure import sweep_idle_threads
from activities.identity import caller_identity
from activities.reminders import Reminders
from settings import Settings, connect, telemetry_runtime
from workflows import search_attributes, served
from workflows.agents import EXAMPLES
from workflows.models import RetentionSweepStart
from workflows.retention import RetentionSweep
from workflows.runner import GuardedRunner
from workflows.sdk import AgentDefinition
from workflows.subagent import SubagentWorkflow
from workflows.thread import ThreadWorkflow

WORKFLOWS: Sequence[type] = [ThreadWorkflow, SubagentWorkflow, RetentionSweep]

log = logging.getLogger("agui.worker")


async def ensure_search_attributes(client: Client, timeout: float = 30) -> None:
    """Register the engine's search attributes in the client's namespace if missing, and
    return once the server takes them.

    Idempotent. A thread workflow cannot set an unregistered attribute, so the worker
    refuses to start without them rather than leave threads stuck. A server learns of a
    registration when its services next read the namespace, every
    ``system.namespaceCacheRefreshInterval`` (2 s in the embedded server, which no longer
    reads them on every use: ``settings.EMBEDDED_DYNAMIC_CONFIG``); a workflow task that
    sets one before then fails and is retried seconds later. So this waits, for up to
    ``timeout`` seconds, until a visibility query naming every attribute is accepted.
    """
    existing = await client.operator_service.list_search_attributes(
        ListSearchAttributesRequest(namespace=client.namespace)
    )
    missing = [key for key in search_attributes.ALL if key.name not in existing.custom_attributes]
    if missing:
        await register_search_attributes(client, missing)
        log.info("registered search attributes %s", sorted(key.name for key in missing))
    query = " AND ".join(f"{key.name} IS NULL" for key in search_attributes.ALL)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        try:
            await client.count_workflows(query)
            return
        except RPCError as err:
            # Not seen yet: INVALID_ARGUMENT ("invalid search attribute").
            if loop.time() > deadline or err.status != RPCStatusCode.INVALID_ARGUMENT:
                raise
        await asyncio.sleep(0.05)


async def register_search_attributes(
    client: Client, keys: Sequence[SearchAttributeKey[Any]]
) -> None:
    """Add ``keys`` to the client's namespace (they must not exist yet)."""
    await client.operator_service.add_search_attributes(
        AddSearchAttributesRequest(
            namespace=client.namespace,
            search_attributes={
                key.name: IndexedValueType.ValueType(key.indexed_value_type.value) for key in keys
            },
        )
    )


def retention_schedule_id(task_queue: str) -> str:
    """The id of the schedule that sweeps ``task_queue``'s threads."""
    return f"agui-retention-{task_queue}"


async def ensure_retention_schedule(client: Client, settings: Settings) -> None:
    """Make the retention schedule match ``settings``: with ``thread_retention`` set, a
    schedule starting :class:`RetentionSweep` on the task queue every
    ``retention_sweep_interval``, created or updated; unset, no schedule.

    Idempotent, and safe for workers starting together: the one that does not create
    the schedule updates it to the same.
    """
    handle = client.get_schedule_handle(retention_schedule_id(settings.task_queue))
    retention = settings.thread_retention
    if retention is None:
        try:
            await handle.delete()
            log.info("deleted the retention schedule %r: no AGUI_THREAD_RETENTION", handle.id)
        except RPCError as err:
            if err.status != RPCStatusCode.NOT_FOUND:
                raise
        return
    schedule = Schedule(
        action=ScheduleActionStartWorkflow(
            RetentionSweep.run,
            RetentionSweepStart(retention=retention),
            id=f"agui-retention-sweep-{settings.task_queue}",
            task_queue=settings.task_queue,
        ),
        spec=ScheduleSpec(
            intervals=[ScheduleIntervalSpec(every=settings.retention_sweep_interval)]
        ),
        # A sweep still deleting when the next is due: the next is skipped.
        policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.SKIP),
    )

    def replace(_: ScheduleUpdateInput) -> ScheduleUpdate:
        return ScheduleUpdate(schedule=schedule)

    try:
        await client.create_schedule(handle.id, schedule)
    except ScheduleAlreadyRunningError:
        await handle.update(replace)
    log.info(
        "retention schedule %r: threads idle over %s deleted every %s",
        handle.id,
        retention,
        settings.retention_sweep_interval,
    )


async def promote_first_build(client: Client, settings: Settings, timeout: float = 30) -> None:
    """Make this worker's build the current one of its Worker Deployment if the deployment
    has none yet: its first deploy then needs no step of its own. A later build becomes
    current only when the deploy says so (``docs/operations.md``)."""
    assert settings.worker_deployment is not None and settings.worker_build_id is not None
    await promote_build(
        client, settings.worker_deployment, settings.worker_build_id, timeout=timeout
    )


async def promote_build(
    client: Client,
    deployment: str,
    build_id: str,
    *,
    over_current: bool = False,
    timeout: float = 30,
) -> None:
    """Make ``build_id`` the current build of ``deployment``: if it has none, or, with
    ``over_current``, whichever is current (a deploy's step 2, which ``make run`` takes).

    Temporal knows a build once one of its workers has polled, so this retries until
    ``timeout`` seconds have passed.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        try:
            described = await client.workflow_service.describe_worker_deployment(
                DescribeWorkerDeploymentRequest(
                    namespace=client.namespace, deployment_name=deployment
                )
            )
            current = described.worker_deployment_info.routing_config.current_deployment_version
            if current.build_id == build_id or (current.build_id and not over_current):
                log.info("worker deployment %r: build %r is current", deployment, current.build_id)
                return
            await client.workflow_service.set_worker_deployment_current_version(
                SetWorkerDeploymentCurrentVersionRequest(
                    namespace=client.namespace,
                    deployment_name=deployment,
                    build_id=build_id,
                    conflict_token=described.conflict_token,
                    identity=client.identity,
                )
            )
            log.info("worker deployment %r: made build %r current", deployment, build_id)
            return
        except RPCError as err:
            # Not polled yet (NOT_FOUND, FAILED_PRECONDITION), another worker of the
            # deployment changed it first (the conflict token, or too many changes at
            # once: RESOURCE_EXHAUSTED), or the server dropped the call (CANCELLED, seen
            # right after a deployment's first worker started on a loaded machine;
            # DEADLINE_EXCEEDED alike): look again. Both calls are safe to repeat: a
            # change that was made shows as the current build at the next look.
            if loop.time() > deadline or err.status not in _LOOK_AGAIN:
                raise
        await asyncio.sleep(0.2)


_LOOK_AGAIN = (
    RPCStatusCode.NOT_FOUND,
    RPCStatusCode.FAILED_PRECONDITION,
    RPCStatusCode.ABORTED,
    RPCStatusCode.RESOURCE_EXHAUSTED,
    RPCStatusCode.CANCELLED,
    RPCStatusCode.DEADLINE_EXCEEDED,
)


def activities(settings: Settings, agents: Iterable[AgentDefinition]) -> list[Callable[..., Any]]:
    """The activities of ``agents`` and the engine's own, with the endpoints ``settings``
    configure."""
    named = served.by_name(served.with_subagents(agents))
    _check_model_names(named)
    notices = Reminders(settings.reminder_webhook_url, settings.webhook_timeout_seconds)
    # An activity shared by agents (one tool, two agents) is registered once.
    unique = dict.fromkeys(fn for agent in named.values() for fn in agent.activities())
    return [
        *unique,
        notices.send_reminder,
        notices.send_escalation,
        caller_identity,
        sweep_idle_threads,
    ]


def _check_model_names(agents: Mapping[str, AgentDefinition]) -> None:
    """Refuse to start with two different models of one name: both would be the activity
    ``model:<name>``, and one agent would silently be answered by the other's model."""
    by_name: dict[str, tuple[str, object]] = {}
    for agent in agents.values():
        model = agent.model
        if model is None:
            continue
        first = by_name.setdefault(model.name, (agent.name, model))
        if first[1] is not model:
            raise ValueError(
                f"Agents {first[0]!r} and {agent.name!r} use two different models named "
                f"{model.name!r}; give each model a name of its own (name=...)."
            )


WORKFLOW_RUNNER = GuardedRunner(UnsandboxedWorkflowRunner())
"""Workflow code runs outside Temporal's sandbox, and never at a workflow task's time
that has passed (``workflows.runner``). The sandbox's restrictions reach only
the modules it imports afresh, and the workflow modules were all passed through (as
Temporal advises for modules whose calls are deterministic; an agent's file imports its
modules the same way, ``docs/agents.md``), so while threads ran they guarded only imports
made inside a workflow's calls. For that the worker paid trips into the sandbox: one per
activation, and several per payload of each workflow task to learn its serialization
context (what they cost: ``docs/bench.md``, "The workflow sandbox"). Determinism is
guarded by replay: ``tests/test_replay.py`` replays recorded threads under the current
code (:func:`build_replayer`), in the default sandbox and as this runner runs them, and a
worker fails a workflow task whose commands differ from its history."""


def build_worker(client: Client, settings: Settings, agents: Iterable[AgentDefinition]) -> Worker:
    """The worker for the configured task queue: the thread workflow, serving ``agents``,
    and their activities.

    Args:
        client: The connected client to poll with.
        settings: The task queue and the activities' endpoints.
        agents: The agents its threads run. They replace any agents an earlier worker of
            this process served on the task queue (``workflows/served.py``); the gateway
            routing to this task queue must serve the same (``create_app``).

    Raises:
        ValueError: Two agents share a name, or two models do.
    """
    agents = tuple(agents)
    worker = Worker(
        client,
        task_queue=settings.task_queue,
        workflows=WORKFLOWS,
        workflow_runner=WORKFLOW_RUNNER,
        activities=activities(settings, agents),
        graceful_shutdown_timeout=timedelta(seconds=settings.worker_shutdown_seconds),
        sticky_queue_schedule_to_start_timeout=timedelta(
            seconds=settings.worker_sticky_queue_seconds
        ),
        deployment_config=deployment_config(settings),
    )
    served.serve(settings.task_queue, agents)
    return worker


def deployment_config(settings: Settings) -> WorkerDeploymentConfig | None:
    """With ``AGUI_WORKER_DEPLOYMENT``, the worker's build in that Worker Deployment.

    Every workflow is pinned to its build, and moves to the current one by continuing as
    new (``workflows/versioning.py``).
    """
    if settings.worker_deployment is None or settings.worker_build_id is None:
        return None
    return WorkerDeploymentConfig(
        version=WorkerDeploymentVersion(settings.worker_deployment, settings.worker_build_id),
        use_worker_versioning=True,
        default_versioning_behavior=VersioningBehavior.PINNED,
    )


REPLAY_BUILD_ID = "agui-replay"
"""The build id of :func:`build_replayer`'s replayer, which names its task queue."""


def build_replayer(
    agents: Iterable[AgentDefinition], runner: WorkflowRunner | None = None
) -> Replayer:
    """A replayer of recorded threads whose agents are among ``agents``, which checks that
    the current code replays them (``tests/test_replay.py``).

    It runs the thread workflow in ``runner``, by default the default sandbox, whose
    restrictions reject a non-deterministic call in the lines of a workflow's own module
    (``bench/replay.py`` passes the worker's runner, :data:`WORKFLOW_RUNNER`, to time what
    a worker replays), on task queue ``replay-<build id>`` (as ``Replayer`` names it),
    where it serves ``agents``.
    """
    served.serve(f"replay-{REPLAY_BUILD_ID}", agents)
    return Replayer(
        workflows=WORKFLOWS,
        workflow_runner=runner or SandboxedWorkflowRunner(),
        data_converter=Settings().data_converter(),
        build_id=REPLAY_BUILD_ID,
    )


async def main(agents: Iterable[AgentDefinition] = EXAMPLES) -> None:
    """Run the worker, serving ``agents``, until SIGINT/SIGTERM, then shut down gracefully."""
    settings = Settings()
    logs.configure(settings.log_format)
    tracing.configure("agui-worker")
    client = await connect(settings, runtime=telemetry_runtime(settings.metrics_bind_address))
    await ensure_search_attributes(client)
    await ensure_retention_schedule(client, settings)
    worker = build_worker(client, settings, agents)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    async with worker:
        log.info("worker polling task queue %r", settings.task_queue)
        if settings.worker_deployment is not None:
            await promote_first_build(client, settings)
        await stop.wait()
        log.info("shutting down: finishing in-flight tasks")
    log.info("worker stopped")


def serve(agents: Iterable[AgentDefinition] = EXAMPLES) -> NoReturn:
    """Run the worker process (:func:`main`) to its end, then exit.

    On uvloop rather than asyncio's own loop: the worker's loop relays every workflow
    task and activity between the Temporal core and Python, and uvloop does that for less
    CPU (``docs/bench.md``, "The event loop"). Workflow code is not affected: the SDK runs
    each workflow on its own deterministic loop.
    """
    uvloop.run(main(agents))
    # The worker has drained and stopped. Skip interpreter teardown: the Temporal core's
    # native threads can outlive it and abort CPython's finalization (SIGABRT).
    logging.shutdown()
    os._exit(0)


if __name__ == "__main__":
    serve()
