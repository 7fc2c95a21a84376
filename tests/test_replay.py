"""Threads paused under earlier code must replay under the current code.

Every history in ``tests/histories/`` (recorded by ``tests/record_histories.py``) is
replayed with Temporal's ``Replayer``. A workflow change that is not deterministic
against a recorded thread (a reordered activity, a timer added without
``workflow.patched``, ...) fails here instead of in production. That holds for the
threads' sub-agent runs too (child workflows, ``workflows/subagent.py``), recorded beside
their thread as ``<scenario>.<agent>.<n>.json``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHistory
from temporalio.worker import WorkflowRunner

from tests.record_histories import AGENTS, HISTORIES, LONG_LIVED, SCENARIOS
from worker import WORKFLOW_RUNNER, build_replayer
from workflows import known_state

RECORDED = sorted(HISTORIES.glob("*.json"))


def test_every_scenario_has_recorded_histories() -> None:
    recorded = {path.name.split(".")[0] for path in HISTORIES.glob("*.json")}
    assert recorded == set(SCENARIOS) | set(LONG_LIVED)
    # A thread continues as new after every run: a waiting thread's latest workflow run
    # replays no agent code, only the carried data.
    assert len(list(HISTORIES.glob("approval_with_edits.*.json"))) == 3
    assert len(list(HISTORIES.glob("long_lived_approval_with_edits.*.json"))) == 1
    # The echoing client's second approval came without its state, on its own update.
    for name in ("state_echoed.3", "state_echoed.4", "long_lived_state_echoed.1"):
        assert known_state.RUN_ON_KNOWN_STATE in (HISTORIES / f"{name}.json").read_text()


def _workflow_type(path: Path) -> str:
    history = WorkflowHistory.from_json(path.stem, path.read_text())
    return history.events[0].workflow_execution_started_event_attributes.workflow_type.name


def test_sub_agent_runs_are_recorded_beside_their_thread() -> None:
    """``<scenario>.<n>.json`` is a workflow run of the thread; ``<scenario>.<agent>.<n>``
    a workflow run of the thread's sub-agent run of ``agent``."""
    kinds = {path.stem: _workflow_type(path) for path in RECORDED}
    assert {kind for stem, kind in kinds.items() if stem.count(".") == 1} == {"ThreadWorkflow"}
    assert {stem: kind for stem, kind in kinds.items() if stem.count(".") == 2} == {
        "ops_cleanup_approved.inspector.1": "SubagentWorkflow",
        "ops_cleanup_approved.cleanup.1": "SubagentWorkflow",
        # Paused on its question, it continued as new; its second run took the answer.
        "treasurer_transfer_approved.transfer.1": "SubagentWorkflow",
        "treasurer_transfer_approved.transfer.2": "SubagentWorkflow",
    }


@pytest.mark.parametrize(
    "runner",
    [None, WORKFLOW_RUNNER],
    ids=["in-the-sandbox", "as-the-worker-runs"],
)
@pytest.mark.parametrize("path", RECORDED, ids=lambda path: path.stem)
async def test_a_recorded_thread_replays_under_the_current_code(
    path: Path, runner: WorkflowRunner | None
) -> None:
    """In the default sandbox, whose restrictions reject a non-deterministic call in a
    workflow's module, and as a worker replays a thread it took over (a deploy, an
    eviction from its cache): outside the sandbox (``worker.WORKFLOW_RUNNER``)."""
    history = WorkflowHistory.from_json(path.stem, path.read_text())
    # The replayer waits forever on a history without a workflow task to replay.
    assert any(
        event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED for event in history.events
    )
    # The replayer serves the recorded threads' agents and the sub-agents they hand work
    # to (``served.with_subagents``): a sub-agent run finds its agent by name, as a thread
    # does.
    await build_replayer(AGENTS, runner).replay_workflow(history)
