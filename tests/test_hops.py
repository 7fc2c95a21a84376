"""``python -m bench.hops`` places every step of an interrupt cycle, the thread's history
events and the client's reads, in the order they happened (``docs/bench.md``, "A
cycle's hops at c=1"). The floor's side is checked with the floor server
(``tests/test_floor_server.py``)."""

from __future__ import annotations

from collections.abc import Sequence

from bench.hops import FINISHED_READ, FIRST_READ, SENT, Hop, Hops, measure_hops, render
from tests.helpers import Stack
from workflows.thread_ids import workflow_id_for

UPDATE_COMPLETED = "WORKFLOW_EXECUTION_UPDATE_COMPLETED"


def _in_order(names: Sequence[str], wanted: Sequence[str]) -> bool:
    remaining = iter(names)
    return all(name in remaining for name in wanted)


def _check(steps: list[Hop], wanted: Sequence[str]) -> None:
    names = [name for name, _ in steps]
    assert names[0] == SENT and names[-2:] == [FIRST_READ, FINISHED_READ], names
    assert _in_order(names, [*wanted, UPDATE_COMPLETED]), names
    history = [at for _, at in steps[:-2]]
    assert history == sorted(history) and history[0] == 0.0, steps
    completed = max(at for name, at in steps if name == UPDATE_COMPLETED)
    assert steps[-1][1] >= completed and steps[-1][1] >= steps[-2][1], steps


def assert_cycle_hops(hops: Hops, tool: Sequence[str]) -> None:
    """``hops`` hold a run that started its thread and a resume that ran ``tool``'s
    history events, each step in order."""
    assert 1 <= hops.counted <= hops.cycles
    _check(hops.run, ["WORKFLOW_EXECUTION_STARTED", "WORKFLOW_TASK_COMPLETED"])
    _check(hops.resume, ["WORKFLOW_TASK_COMPLETED", *tool, "WORKFLOW_TASK_COMPLETED"])


async def test_hops_place_each_step_of_the_engines_cycle_in_order(stack: Stack) -> None:
    assert stack.client is not None
    hops = await measure_hops(
        stack.http, stack.client, "/agents/demo", workflow_id_for, cycles=2, warmup=0
    )
    assert_cycle_hops(hops, tool=["ACTIVITY_TASK_SCHEDULED", "ACTIVITY_TASK_COMPLETED"])
    table = render(hops)
    assert table.startswith(f"{hops.counted} of 2 cycles")
    assert f"| {UPDATE_COMPLETED} |" in table and "| resume | at, ms |" in table
