"""``python -m bench.replay [--turns N]``: what waking a long thread costs a worker that
has not cached it, and what bounding that costs in history.

A worker replays a thread's whole live workflow run when it takes the thread up without
its cache: after a restart, or with more threads in flight than its cache holds. Under
Worker Versioning a thread keeps its runs in one workflow run until it has
``workflows.thread.REPLAYED_EVENTS`` events, then continues as new at its next rest,
writing its carried state twice (the old run's last event, the new run's first).

This drives one conversation (``bench.growth``'s turns, an interrupt cycle each) for
``--turns`` turns on a versioned worker, then reports each workflow run of the thread's
chain with the CPU a replay of it takes (``Replayer``, in the worker's sandbox), and the
history bytes per turn over windows of 40 turns, continue-as-new included: what the
thread's history grows by in the long run, where ``make bench``'s growth table shows the
marked turn's own runs. See ``docs/bench.md``, "Replaying a long thread".
"""

from __future__ import annotations

import argparse
import time

import httpx
import uvloop
from temporalio.client import Client

import worker as engine
from bench.conversation import Conversation
from bench.growth import turn
from bench.history import served_runs
from bench.stack import running_stack
from workflows.agents import EXAMPLES
from workflows.thread_ids import workflow_id_for

WINDOW = 40
"""Turns per window of the history bytes: about as many as lie between two of the
conversation's continues-as-new (``docs/bench.md``), so a window holds one or none."""


async def replays(client: Client, workflow_id: str) -> list[tuple[int, float]]:
    """Each workflow run of ``workflow_id``'s chain, first to last: its events, and the
    CPU seconds replaying it in the worker's sandbox took.

    Raises:
        RuntimeError: A workflow run did not replay.
    """
    replayer = engine.build_replayer(EXAMPLES, engine.WORKFLOW_RUNNER)
    described = await client.get_workflow_handle(workflow_id).describe()
    run_id = described.raw_description.workflow_execution_info.first_run_id
    runs: list[tuple[int, float]] = []
    while run_id:
        history = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
        started = time.process_time()
        result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
        if result.replay_failure is not None:
            raise RuntimeError(f"workflow run {run_id} did not replay: {result.replay_failure}")
        runs.append((len(history.events), time.process_time() - started))
        last = history.events[-1].workflow_execution_continued_as_new_event_attributes
        run_id = last.new_execution_run_id
    return runs


async def main() -> None:
    """Parse the flags, drive the conversation, print the figures."""
    parser = argparse.ArgumentParser(prog="python -m bench.replay", description=__doc__)
    parser.add_argument("--turns", type=int, default=200, help="turns (default 200)")
    args = parser.parse_args()
    async with running_stack(EXAMPLES, None, versioned=True) as stack:
        async with httpx.AsyncClient(
            base_url=stack.base_url, headers=stack.headers, timeout=60
        ) as http:
            conversation = Conversation()
            for _ in range(args.turns):
                await turn(http, conversation, lambda: {})
        workflow_id = workflow_id_for(conversation.thread_id)
        runs = await replays(stack.client, workflow_id)
        per_run = (await served_runs(stack.client, workflow_id)).per_run
    pairs = zip(per_run[::2], per_run[1::2], strict=True)
    per_turn = [pause.bytes + resume.bytes for pause, resume in pairs]
    print(f"{args.turns} turns: {len(runs)} workflow runs")
    for number, (events, seconds) in enumerate(runs, 1):
        print(f"  workflow run {number}: {events} events, replayed in {seconds * 1000:.0f} ms CPU")
    print(f"history KB per turn, continue-as-new included, by {WINDOW} turns:")
    for first in range(0, len(per_turn), WINDOW):
        window = per_turn[first : first + WINDOW]
        print(f"  turns {first + 1}-{first + len(window)}: {sum(window) / len(window) / 1024:.1f}")


if __name__ == "__main__":
    uvloop.run(main())
