"""Worker Versioning (``AGUI_WORKER_DEPLOYMENT``): a thread is pinned to its build and
keeps its runs in one workflow run; a deploy moves it to the new current build, by its
next run or by the ``upgrade`` signal the deploy sends, and never replays its old runs
under the new code.

A sub-agent run waiting on its question moves the same way, and so do the waiting threads
of an engine that turns Worker Versioning on, or off again.

The deploy is the one ``docs/operations.md`` describes, with the ``temporal`` CLI: start
the new build's workers beside the old ones, make the new build current, signal the
threads pinned to the old build, stop the old workers once none is left.

Both builds run in this process, which has one agent registry per task queue
(``workflows/served.py``): once the new build's worker starts, the old build's too sees
the changed agent. So the threads here run no agent code between the new build's start
and their move to it; what the old build still does for them, continuing as new, is the
engine's own code.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from temporalio.api.enums.v1 import RoutingConfigUpdateState, VersioningBehavior
from temporalio.api.workflowservice.v1 import DescribeWorkerDeploymentRequest
from temporalio.client import Client, WorkflowHandle
from temporalio.service import RPCError, RPCStatusCode

from gateway.streaming import thread_handle
from settings import Settings
from tests.helpers import (
    TEST_SECRET,
    eventually,
    gateway_client,
    post_run,
    run_input,
    serve_gateway,
    temporal_cli,
)
from tests.test_deploys import approve, failed_workflow_tasks, support
from tests.test_subagents import AGENTS, interrupts_of, resolve, results, resume
from worker import build_worker, promote_first_build
from workflows import thread
from workflows.agents import EXAMPLES
from workflows.errors import ErrorCode


async def pinned_to(client: Client, thread_id: str) -> tuple[str | None, str]:
    """The build the thread's live workflow run is pinned to (``None`` while it is not
    pinned: a new run is, once its first workflow task completes), and that run's id."""
    return await run_pinned_to(thread_handle(client, thread_id))


async def run_pinned_to(handle: WorkflowHandle[Any, Any]) -> tuple[str | None, str]:
    """:func:`pinned_to` for any workflow."""
    described = await handle.describe()
    versioning = described.raw_description.workflow_execution_info.versioning_info
    pinned = versioning.behavior == VersioningBehavior.VERSIONING_BEHAVIOR_PINNED
    return versioning.deployment_version.build_id if pinned else None, described.run_id or ""


async def make_current(client: Client, deployment: str, build_id: str | None) -> None:
    """Step 2 of the deploy: make ``build_id`` (``None``: unversioned workers) current,
    retrying until its worker has polled."""
    target = ["--build-id", build_id] if build_id else ["--unversioned"]

    async def made_current() -> bool:
        code, _, _ = await temporal_cli(
            client,
            "worker",
            "deployment",
            "set-current-version",
            "--deployment-name",
            deployment,
            *target,
            "--yes",
        )
        return code == 0

    await eventually(made_current, timeout=30, what=f"{target} to become current")

    async def propagated() -> bool:
        try:
            described = await client.workflow_service.describe_worker_deployment(
                DescribeWorkerDeploymentRequest(
                    namespace=client.namespace, deployment_name=deployment
                )
            )
        except RPCError as err:
            # On a loaded machine the server drops the call now and then ("operation was
            # canceled"), as worker.promote_build knows: look again.
            if err.status in (RPCStatusCode.CANCELLED, RPCStatusCode.DEADLINE_EXCEEDED):
                return False
            raise
        state = described.worker_deployment_info.routing_config_update_state
        return state == RoutingConfigUpdateState.ROUTING_CONFIG_UPDATE_STATE_COMPLETED

    await eventually(propagated, what="the new routing to reach the task queues")


async def signal_upgrade(client: Client, deployment: str, build_id: str) -> None:
    """Step 3 of the deploy: signal every workflow pinned to ``build_id`` to move."""
    code, _, err = await temporal_cli(
        client,
        "workflow",
        "signal",
        "--name",
        "upgrade",
        "--query",
        f'TemporalWorkerDeploymentVersion="{deployment}:{build_id}" AND ExecutionStatus="Running"',
        "--reason",
        "deploy",
        "--yes",
    )
    assert code == 0, err


def builds(**fields: Any) -> tuple[Settings, Settings]:
    """The settings of a deployment's builds ``b1`` and ``b2``, on a fresh task queue."""
    old = Settings(
        task_queue=f"tq-{uuid.uuid4()}",
        auth_hs256_secret=TEST_SECRET,
        worker_deployment=f"agui-{uuid.uuid4().hex[:8]}",
        worker_build_id="b1",
        **fields,
    )
    return old, old.model_copy(update={"worker_build_id": "b2"})


def without_versioning(settings: Settings) -> Settings:
    """``settings`` of a worker of the same task queue that is no Worker Deployment's."""
    return settings.model_copy(update={"worker_deployment": None, "worker_build_id": None})


async def test_a_deploy_moves_pinned_threads_to_the_new_build_without_replaying_their_runs(
    client: Client,
) -> None:
    old, new = builds()
    deployment = old.worker_deployment
    assert deployment is not None
    gateway = serve_gateway(old, client, [support(threshold=100)])
    async with gateway as url, gateway_client(url) as http:
        old_worker = build_worker(client, old, [support(threshold=100)])
        serving = asyncio.create_task(old_worker.run())
        try:
            await promote_first_build(client, old)

            async def ask(amount: str) -> tuple[str, dict[str, object]]:
                thread_id = f"thread-{uuid.uuid4()}"
                body = run_input(thread_id, "r1", f"refund {amount} on B42")
                events = await post_run(http, "deploys", body)
                [approval] = events[-1]["outcome"]["interrupts"]
                return thread_id, approval

            # Under the old rule (over 100) all three wait; under the new (over 300)
            # only the 500 would.
            moot, moot_approval = await ask("250")
            still, still_approval = await ask("500")
            busy, busy_approval = await ask("400")
            first = await pinned_to(client, busy)
            assert first[0] == "b1"
            done = await post_run(http, "deploys", approve(busy, busy_approval))
            assert done[-1]["outcome"] == {"type": "success"}
            # Both runs in one workflow run: its history holds the old agent's turns.
            assert await pinned_to(client, busy) == first

            async with build_worker(client, new, [support(threshold=300)]):
                await make_current(client, deployment, "b2")

                # A thread's own next run moves it: at its end it continues as new on b2.
                # (20 needs no approval under either rule.)
                body = run_input(busy, "r3", "refund 400 on B42", "refund 20 on C7")
                body["messages"] = [
                    *(await http.get(f"/threads/{busy}")).json()["messages"],
                    body["messages"][1],
                ]
                again = await post_run(http, "deploys", body)
                assert again[-1]["outcome"] == {"type": "success"}

                async def moved(thread_id: str) -> bool:
                    return (await pinned_to(client, thread_id))[0] == "b2"

                await eventually(lambda: moved(busy), what="the thread's run to move it")
                # Resting threads move when the deploy signals them.
                for thread_id in (moot, still):
                    assert (await pinned_to(client, thread_id))[0] == "b1"
                await signal_upgrade(client, deployment, "b1")
                for thread_id in (moot, still):
                    await eventually(lambda t=thread_id: moved(t), what="the signal to move it")
                await old_worker.shutdown()

                # Only b2 serves now, with the new rule.
                failed = await post_run(http, "deploys", approve(moot, moot_approval))
                assert failed[-1]["code"] == ErrorCode.AGENT_FAILED
                assert "changed while it was paused" in failed[-1]["message"]
                resumed = await post_run(http, "deploys", approve(still, still_approval))
                assert resumed[-1]["outcome"] == {"type": "success"}
                body = run_input(busy, "r4", "refund 250 on D1")
                body["messages"] = [
                    *(await http.get(f"/threads/{busy}")).json()["messages"],
                    body["messages"][0],
                ]
                # 250 needs no approval under b2's rule.
                unasked = await post_run(http, "deploys", body)
                assert unasked[-1]["outcome"] == {"type": "success"}
                for thread_id in (moot, still, busy):
                    assert (await pinned_to(client, thread_id))[0] == "b2"
                    assert await failed_workflow_tasks(client, thread_id) == 0
        finally:
            if not serving.done():
                await old_worker.shutdown()


async def test_a_sub_agent_waiting_on_its_question_moves_with_the_deploy(client: Client) -> None:
    old, new = builds()
    deployment = old.worker_deployment
    assert deployment is not None
    async with serve_gateway(old, client, AGENTS) as url, gateway_client(url) as http:
        old_worker = build_worker(client, old, AGENTS)
        serving = asyncio.create_task(old_worker.run())
        try:
            await promote_first_build(client, old)
            thread_id = f"thread-{uuid.uuid4()}"
            events = await post_run(http, "shop", run_input(thread_id, "r1", "card: charge 20"))
            [asked] = interrupts_of(events)
            child = client.get_workflow_handle(asked["subagentRunId"])

            async def on(handle: WorkflowHandle[Any, Any], build_id: str) -> bool:
                return (await run_pinned_to(handle))[0] == build_id

            # The sub-agent run continued as new to wait for its answer.
            await eventually(lambda: on(child, "b1"), what="the sub-agent run to wait on b1")
            async with build_worker(client, new, AGENTS):
                await make_current(client, deployment, "b2")
                await signal_upgrade(client, deployment, "b1")
                for handle in (child, thread_handle(client, thread_id)):
                    await eventually(lambda h=handle: on(h, "b2"), what="the signal to move it")
                await old_worker.shutdown()

                done = await post_run(http, "shop", resume(thread_id, "r2", resolve(asked, "visa")))
                assert list(results(done, asked["subagentRunId"]).values()) == ["20 on visa"]
                assert await failed_workflow_tasks(client, thread_id) == 0
        finally:
            if not serving.done():
                await old_worker.shutdown()


async def waiting_thread(http: Any) -> tuple[str, dict[str, object]]:
    """A new thread of the ``deploys`` agent, waiting on a refund's approval."""
    thread_id = f"thread-{uuid.uuid4()}"
    events = await post_run(http, "deploys", run_input(thread_id, "r1", "refund 500 on B42"))
    [approval] = events[-1]["outcome"]["interrupts"]
    return thread_id, approval


async def test_turning_versioning_on_lets_the_first_build_serve_the_waiting_threads(
    client: Client,
) -> None:
    versioned, _ = builds()
    unversioned = without_versioning(versioned)
    agents = [support(threshold=100)]
    async with serve_gateway(unversioned, client, agents) as url, gateway_client(url) as http:
        async with build_worker(client, unversioned, agents):
            thread_id, approval = await waiting_thread(http)
        assert (await pinned_to(client, thread_id))[0] is None

        async with build_worker(client, versioned, agents):
            await promote_first_build(client, versioned)
            done = await post_run(http, "deploys", approve(thread_id, approval))
            assert done[-1]["outcome"] == {"type": "success"}
            assert (await pinned_to(client, thread_id))[0] == "b1"
            assert await failed_workflow_tasks(client, thread_id) == 0


async def test_turning_versioning_off_moves_pinned_threads_to_unversioned_workers(
    client: Client,
) -> None:
    versioned, _ = builds()
    deployment = versioned.worker_deployment
    assert deployment is not None
    unversioned = without_versioning(versioned)
    agents = [support(threshold=100)]
    async with serve_gateway(unversioned, client, agents) as url, gateway_client(url) as http:
        old_worker = build_worker(client, versioned, agents)
        serving = asyncio.create_task(old_worker.run())
        try:
            await promote_first_build(client, versioned)
            thread_id, approval = await waiting_thread(http)
            pinned = await pinned_to(client, thread_id)
            assert pinned[0] == "b1"
            async with build_worker(client, unversioned, agents):
                await make_current(client, deployment, None)
                await signal_upgrade(client, deployment, "b1")

                async def moved() -> bool:
                    build, run_id = await pinned_to(client, thread_id)
                    return build is None and run_id != pinned[1]

                await eventually(moved, what="the signal to move it off b1")
                await old_worker.shutdown()

                done = await post_run(http, "deploys", approve(thread_id, approval))
                assert done[-1]["outcome"] == {"type": "success"}
                assert await failed_workflow_tasks(client, thread_id) == 0
        finally:
            if not serving.done():
                await old_worker.shutdown()


async def test_a_pinned_thread_continues_as_new_at_rest_once_its_history_is_long(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A worker that takes the thread up without its cache replays at most this many
    # events: a few runs' worth here.
    monkeypatch.setattr(thread, "REPLAYED_EVENTS", 40)
    settings, _ = builds()
    async with (
        serve_gateway(settings, client, EXAMPLES) as url,
        gateway_client(url) as http,
        build_worker(client, settings, EXAMPLES),
    ):
        await promote_first_build(client, settings)
        thread_id = f"thread-{uuid.uuid4()}"
        handle = thread_handle(client, thread_id)
        runs: set[str] = set()
        messages: list[dict[str, Any]] = []
        for number in range(1, 9):
            asked = {"id": f"u{number}", "role": "user", "content": f"hello {number}"}
            body = run_input(thread_id, f"r{number}") | {"messages": [*messages, asked]}
            done = await post_run(http, "demo", body)
            assert done[-1]["outcome"] == {"type": "success"}
            messages = (await http.get(f"/threads/{thread_id}")).json()["messages"]

            async def pinned() -> bool:
                return (await pinned_to(client, thread_id))[0] == "b1"

            await eventually(pinned, what="the thread's live workflow run to be pinned")
            runs.add((await pinned_to(client, thread_id))[1])

    assert len(runs) >= 2
    assert [m["content"] for m in messages if m["role"] == "user"] == [
        f"hello {number}" for number in range(1, 9)
    ]
    for run_id in runs:
        history = await client.get_workflow_handle(handle.id, run_id=run_id).fetch_history()
        # Past the bound by at most the run that crossed it.
        assert len(history.events) < 40 + 20
