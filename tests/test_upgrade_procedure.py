"""The upgrade procedure of docs/operations.md, run on its worked example in
``tests/upgrade/``: one workflow type in four stages (initial, patched, patch deprecated,
patch complete), after samples-python ``patching/``.

Histories recorded on a real server under each stage are replayed under the others with
Temporal's ``Replayer``, which is what a worker of the next deploy does with the runs it
picks up; the live tests replace a stage-1 worker by a stage-2 one under open runs.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle, WorkflowHistory
from temporalio.worker import Replayer, Worker
from temporalio.workflow import NondeterminismError

from settings import Settings
from tests.helpers import eventually
from tests.upgrade import (
    stage_1_initial,
    stage_2_patched,
    stage_3_patch_deprecated,
    stage_4_patch_complete,
)
from tests.upgrade.activities import send_v1, send_v2
from tests.upgrade.approvals import Approvals

STAGES: dict[int, type[Approvals]] = {
    1: stage_1_initial.UpgradeExample,
    2: stage_2_patched.UpgradeExample,
    3: stage_3_patch_deprecated.UpgradeExample,
    4: stage_4_patch_complete.UpgradeExample,
}

Handle = WorkflowHandle[stage_1_initial.UpgradeExample, list[str]]
"""A run of ``UpgradeExample``; every stage's runs are the same type to the server."""


def worker(client: Client, task_queue: str, stage: int) -> Worker:
    """A worker running stage ``stage``; each has both activities, since the change is in
    which one the workflow calls."""
    return Worker(
        client, task_queue=task_queue, workflows=[STAGES[stage]], activities=[send_v1, send_v2]
    )


async def start(client: Client, task_queue: str, approvals: int) -> Handle:
    """A run that will wait for ``approvals`` approvals (the stage is the worker's)."""
    return await client.start_workflow(
        stage_1_initial.UpgradeExample.run,
        approvals,
        id=f"upgrade-{uuid.uuid4()}",
        task_queue=task_queue,
    )


async def waiting(handle: Handle, *, sent: int) -> WorkflowHistory:
    """The run's history once it has sent ``sent`` times and waits for the next approval:
    it ends at a completed workflow task, the point a replaced worker picks up from."""

    async def settled() -> bool:
        events = (await handle.fetch_history()).events
        sends = [e for e in events if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED]
        return (
            len(sends) == sent
            and events[-1].event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED
        )

    await eventually(settled, what=f"{handle.id} to wait after {sent} sends")
    return await handle.fetch_history()


async def completed(handle: Handle) -> WorkflowHistory:
    """The history of a run, approved in full, once it completed."""
    for _ in range(2):
        await handle.signal(Approvals.approve)
    await handle.result()
    return await handle.fetch_history()


@pytest.fixture(scope="module")
async def histories(client: Client) -> AsyncIterator[dict[str, WorkflowHistory]]:
    """Histories of two-approval runs under each stage: ``1-waiting`` (no approval yet),
    ``1-paused`` (sent ``v1`` once, waits for the second approval), and ``N-completed``."""
    recorded: dict[str, WorkflowHistory] = {}
    for stage in STAGES:
        task_queue = f"tq-{uuid.uuid4()}"
        async with worker(client, task_queue, stage):
            if stage == 1:
                recorded["1-waiting"] = await waiting(await start(client, task_queue, 2), sent=0)
                paused = await start(client, task_queue, 2)
                await paused.signal(Approvals.approve)
                recorded["1-paused"] = await waiting(paused, sent=1)
            recorded[f"{stage}-completed"] = await completed(await start(client, task_queue, 2))
    yield recorded


REPLAYS = [
    # Stage 2 replays every run of stage 1, at any point.
    ("1-paused", 2, True),
    ("1-completed", 2, True),
    # Without the old branch, a run of stage 1 that went past the send no longer replays...
    ("1-paused", 3, False),
    ("1-completed", 3, False),
    ("1-paused", 4, False),
    ("1-completed", 4, False),
    # ... but one that has not reached it yet does: its history has no send to contradict.
    ("1-waiting", 4, True),
    # Runs that stage 2 marked replay under stage 3, which asks for the marker; stage 4
    # does not, and fails on it ("Non-deprecated patch marker ...").
    ("2-completed", 3, True),
    ("2-completed", 4, False),
    # Stage 3's deprecated marker is skipped by stage 4 and read by stage 2 (a rollback);
    # stage 4's runs have none, and stage 2 takes them for old runs.
    ("3-completed", 4, True),
    ("3-completed", 2, True),
    ("4-completed", 2, False),
]


@pytest.mark.parametrize(
    ("recorded", "stage", "replays"),
    REPLAYS,
    ids=[f"{recorded} under stage {stage}" for recorded, stage, _ in REPLAYS],
)
async def test_a_history_replays_under_a_stage_or_fails_as_nondeterministic(
    histories: dict[str, WorkflowHistory], recorded: str, stage: int, replays: bool
) -> None:
    replayer = Replayer(workflows=[STAGES[stage]], data_converter=Settings().data_converter())
    if replays:
        await replayer.replay_workflow(histories[recorded])
    else:
        with pytest.raises(NondeterminismError):
            await replayer.replay_workflow(histories[recorded])


async def test_a_run_that_sent_v1_under_stage_1_keeps_sending_v1_under_stage_2(
    client: Client,
) -> None:
    """The stage-2 worker replays the first send without the marker, so ``patched`` is
    false for the whole run: the second send, made live, is ``v1`` too."""
    task_queue = f"tq-{uuid.uuid4()}"
    async with worker(client, task_queue, 1):
        old = await start(client, task_queue, 2)
        await old.signal(Approvals.approve)
        await waiting(old, sent=1)
    async with worker(client, task_queue, 2):
        await old.signal(Approvals.approve)
        assert await old.result() == ["v1", "v1"]


async def test_runs_that_have_not_sent_yet_send_v2_under_stage_2(client: Client) -> None:
    """``patched`` first runs live in both, so both take the new branch; a run paused
    before the changed command needs no old branch, whenever it started."""
    task_queue = f"tq-{uuid.uuid4()}"
    async with worker(client, task_queue, 1):
        # Started under stage 1, left waiting before its first send.
        early = await start(client, task_queue, 2)
        await waiting(early, sent=0)
    async with worker(client, task_queue, 2):
        new = await start(client, task_queue, 2)
        for handle in (early, new):
            for _ in range(2):
                await handle.signal(Approvals.approve)
        assert await early.result() == ["v2", "v2"]
        assert await new.result() == ["v2", "v2"]
