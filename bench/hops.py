"""``python -m bench.hops``: where an interrupt cycle's time goes at c=1, hop by hop.

One cycle after another, each on a new thread, it sends a run that pauses on an approval
and the resume that approves it, as the side-by-side client does, and then reads the
thread's workflow history: every event is placed by its time on the Temporal server
against the moment the client sent the run or the resume, followed by when the client
read its first event and its ``RUN_FINISHED``. It prints each step's median.

It measures the engine (``make run``) and the cycle's floor (``python -m
bench.floor_server``, with ``--floor``) alike, so the two read hop for hop
(``docs/bench.md``, "A cycle's hops at c=1"). The server's clock must be the client's:
run it on the server's machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import httpx
import uvloop
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client

from bench.history import workflow_runs
from workflows.thread_ids import workflow_id_for

Hop = tuple[str, float]
"""A step and when it happened, in milliseconds from the moment the client sent."""
SENT, FIRST_READ, FINISHED_READ = "the client sends", "its first event read", "RUN_FINISHED read"


@dataclass(frozen=True)
class Posted:
    """A run as the client saw it, in seconds since the epoch: the client's clock, which
    must be the Temporal server's."""

    sent: float
    first: float
    finished: float
    events: list[dict[str, Any]]

    def hops(self, history: Sequence[HistoryEvent]) -> list[Hop]:
        """The run's steps: ``history``, the events it wrote, then the client's reads."""
        steps = [(SENT, self.sent)]
        steps += [(_name(event), _seconds(event)) for event in history]
        steps += [(FIRST_READ, self.first), (FINISHED_READ, self.finished)]
        return [(name, (at - self.sent) * 1000) for name, at in steps]


@dataclass(frozen=True)
class Hops:
    """The median steps of a run and of its resume, over the cycles whose histories had
    the most common shape (``counted`` of ``cycles``)."""

    run: list[Hop]
    resume: list[Hop]
    counted: int
    cycles: int


def floor_workflow_id(thread_id: str) -> str:
    """The workflow of a thread of the floor (``bench.floor_server``): the thread's id."""
    return thread_id


async def _post(http: httpx.AsyncClient, path: str, body: dict[str, Any]) -> Posted:
    """Send a run and read its stream to the end."""
    events: list[dict[str, Any]] = []
    first: float | None = None
    sent = time.time()
    async with http.stream("POST", path, json=body) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            if line.startswith("data:"):
                first = first or time.time()
                events.append(json.loads(line.removeprefix("data:")))
    if first is None or events[-1]["type"] != "RUN_FINISHED":
        raise RuntimeError(f"the run did not finish: {events[-1:]}")
    return Posted(sent, first, time.time(), events)


def _conversation(sent: list[dict[str, Any]], events: list[dict[str, Any]]) -> list[Any]:
    """The messages a client sends after a run: its last ``MESSAGES_SNAPSHOT``'s, or,
    from a server that sends none, what it sent and the tool calls the run streamed."""
    snapshots = [event for event in events if event["type"] == "MESSAGES_SNAPSHOT"]
    if snapshots:
        messages: list[Any] = snapshots[-1]["messages"]
        return messages
    calls: dict[str, dict[str, Any]] = {}
    asked_by = ""
    for event in events:
        if event["type"] == "TOOL_CALL_START":
            asked_by = event.get("parentMessageId") or f"ask-{uuid.uuid4()}"
            function = {"name": event["toolCallName"], "arguments": ""}
            calls[event["toolCallId"]] = {
                "id": event["toolCallId"],
                "type": "function",
                "function": function,
            }
        elif event["type"] == "TOOL_CALL_ARGS":
            calls[event["toolCallId"]]["function"]["arguments"] += event["delta"]
    return [*sent, {"id": asked_by, "role": "assistant", "toolCalls": list(calls.values())}]


def _seconds(event: HistoryEvent) -> float:
    return event.event_time.seconds + event.event_time.nanos / 1e9


def _name(event: HistoryEvent) -> str:
    return EventType.Name(event.event_type).removeprefix("EVENT_TYPE_")


async def cycle(
    http: httpx.AsyncClient, client: Client, path: str, workflow_id: Callable[[str], str]
) -> tuple[list[Hop], list[Hop]]:
    """One cycle on a new thread: the run's steps and the resume's."""
    thread_id = f"hops-{uuid.uuid4()}"
    sent = [{"id": "u1", "role": "user", "content": "mail a@b.com"}]
    run = await _post(http, path, {"threadId": thread_id, "runId": "r1", "messages": sent})
    outcome = run.events[-1].get("outcome") or {}
    if outcome.get("type") != "interrupt":
        raise RuntimeError(f"the run did not pause: {outcome}")
    [interrupt] = outcome["interrupts"]
    states = [event["snapshot"] for event in run.events if event["type"] == "STATE_SNAPSHOT"]
    entry = {"interruptId": interrupt["id"], "status": "resolved", "payload": {"approved": True}}
    body = {
        "threadId": thread_id,
        "runId": "r2",
        "messages": _conversation(sent, run.events),
        "state": states[-1] if states else {},
        "resume": [entry],
    }
    resume = await _post(http, path, body)
    if resume.events[-1].get("outcome") != {"type": "success"}:
        raise RuntimeError(f"the resume did not succeed: {resume.events[-1]}")
    history = [
        event for events in await workflow_runs(client, workflow_id(thread_id)) for event in events
    ]
    split = next(
        (index for index, event in enumerate(history) if _seconds(event) >= resume.sent),
        len(history),
    )
    return run.hops(history[:split]), resume.hops(history[split:])


def medians(samples: Sequence[list[Hop]]) -> tuple[list[Hop], int]:
    """Each step's median over the samples of the most common sequence of steps, and
    how many those were."""
    shapes = Counter(tuple(name for name, _ in sample) for sample in samples)
    shape, count = shapes.most_common(1)[0]
    kept = [sample for sample in samples if tuple(name for name, _ in sample) == shape]
    steps = [
        (name, statistics.median(sample[index][1] for sample in kept))
        for index, name in enumerate(shape)
    ]
    return steps, count


async def measure_hops(
    http: httpx.AsyncClient,
    client: Client,
    path: str,
    workflow_id: Callable[[str], str],
    cycles: int,
    warmup: int,
) -> Hops:
    """``warmup`` cycles not counted, then ``cycles`` cycles, one at a time."""
    for _ in range(warmup):
        await cycle(http, client, path, workflow_id)
    runs: list[list[Hop]] = []
    resumes: list[list[Hop]] = []
    for _ in range(cycles):
        run, resume = await cycle(http, client, path, workflow_id)
        runs.append(run)
        resumes.append(resume)
    run_steps, run_count = medians(runs)
    resume_steps, resume_count = medians(resumes)
    return Hops(run_steps, resume_steps, min(run_count, resume_count), cycles)


def render(hops: Hops) -> str:
    """Both tables: each step, its median time since the client sent, and the time since
    the step before."""
    lines = [f"{hops.counted} of {hops.cycles} cycles with the most common histories"]
    for title, steps in (("run", hops.run), ("resume", hops.resume)):
        lines += ["", f"| {title} | at, ms | since the step before |", "| --- | --- | --- |"]
        before = 0.0
        for name, at in steps:
            lines.append(f"| {name} | {at:.2f} | {at - before:.2f} |")
            before = at
    return "\n".join(lines)


async def main(args: argparse.Namespace) -> None:
    base, _, path = args.url.partition("/agents/")
    headers = dict(header.split(": ", 1) for header in args.header)
    client = await Client.connect(args.temporal, namespace=args.namespace)
    workflow_id = floor_workflow_id if args.floor else workflow_id_for
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=30) as http:
        hops = await measure_hops(
            http, client, f"/agents/{path}", workflow_id, args.cycles, args.warmup
        )
    print(render(hops))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000/agents/demo")
    parser.add_argument("--temporal", default="localhost:7233", help="the Temporal server")
    parser.add_argument("--namespace", default="default")
    parser.add_argument(
        "--floor", action="store_true", help="the floor's workflow ids (the thread ids)"
    )
    parser.add_argument("--header", action="append", default=[], help='"Name: value"')
    parser.add_argument("--cycles", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=5)
    uvloop.run(main(parser.parse_args()))
