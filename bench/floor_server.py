"""The cycle's floor served over AG-UI: ``python -m bench.floor_server``.

The side-by-side run (``../shared/peers``) reads the engine against a peer with one AG-UI
client, in cycles per second and CPU per cycle of every process. This serves that client
the floor cycle (:class:`bench.workflows.FloorCycleWorkflow`: Temporal's share of an
interrupt cycle and nothing else) behind the least HTTP the client needs, laid out as
``make run`` lays out the engine: a dev server on a SQLite file with the embedded server's
settings, a worker and an HTTP server, each a process of its own. What the client
measures here is what no engine whose cycle has this shape on Temporal can beat on the
machine (``docs/bench.md``, "The floor against the peer").

The HTTP server checks only what it must to answer: the body is a ``RunAgentInput``, a
resume answers the interrupt of the conversation's last tool call. No tokens, no
ownership, no event log, no operator view, no payload encryption: it is a yardstick,
listening on loopback, not a gateway.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import signal
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import uvicorn
import uvloop
from ag_ui.core import (
    AssistantMessage,
    BaseEvent,
    Interrupt,
    RunAgentInput,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
)
from ag_ui.encoder import EventEncoder
from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from temporalio.client import Client, WithStartWorkflowOperation, WorkflowUpdateStage
from temporalio.common import VersioningBehavior, WorkerDeploymentVersion, WorkflowIDConflictPolicy
from temporalio.converter import DataConverter
from temporalio.worker import Worker, WorkerDeploymentConfig

from bench.deployed import ROOT, connected, healthy, server_argv, stop
from bench.stack import free_port
from bench.workflows import FloorCycleWorkflow, noop_tool
from gateway.streaming import opens_thread
from settings import fit_embedded_visibility_indexes
from worker import WORKFLOW_RUNNER, promote_build

TASK_QUEUE = "floor"
PATH = "/agents/floor"
TOOL = "send_email"
_ANNOUNCEMENT = re.compile(r"floor: (\S+) temporal: (\S+) metrics: (\S+) pids: (\d+(?: \d+)*)")


@dataclass(frozen=True)
class Announcement:
    """What the floor server prints, a line, once it serves: where, where its Temporal
    server and that server's metrics are, and which processes are the floor's (the
    Temporal server, the worker, the HTTP server), whose CPU the client reads."""

    url: str
    temporal: str
    metrics: str
    pids: tuple[int, ...]

    def line(self) -> str:
        pids = " ".join(str(pid) for pid in self.pids)
        return f"floor: {self.url} temporal: {self.temporal} metrics: {self.metrics} pids: {pids}"

    @classmethod
    def parse(cls, line: str) -> Announcement:
        """The announcement :meth:`line` wrote (a trailing newline aside).

        Raises:
            ValueError: ``line`` is not one.
        """
        said = _ANNOUNCEMENT.fullmatch(line.rstrip("\n"))
        if said is None:
            raise ValueError(f"not the floor server's announcement: {line!r}")
        return cls(said[1], said[2], said[3], tuple(int(pid) for pid in said[4].split()))


def interrupt_id(call_id: str) -> str:
    """The interrupt that asks to approve tool call ``call_id``: derived from the call,
    which the client resends with the conversation, so the HTTP server keeps nothing
    between a run and its resume."""
    return f"approve-{call_id}"


def last_call(run_input: RunAgentInput) -> str | None:
    """The id of the last tool call in the conversation the client sent."""
    calls = [
        call.id
        for message in run_input.messages
        if isinstance(message, AssistantMessage)
        for call in message.tool_calls or ()
    ]
    return calls[-1] if calls else None


def create_app(client: Client) -> FastAPI:
    """``POST /agents/floor``: a run with no ``resume`` pauses on one ``tool_call``
    interrupt (:meth:`FloorCycleWorkflow.pause`), a run with one runs the tool
    (:meth:`FloorCycleWorkflow.resume`). Each is one update, sent as the gateway sends a
    thread's runs: with the workflow's start if the conversation is new, accepted first
    and its result awaited after. The events go out in one chunk once the update is done,
    as the gateway sends a run that ends within its first poll interval."""
    app = FastAPI()
    encoder = EventEncoder()

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.post(PATH)
    async def run(request: Request) -> Response:
        try:
            run_input = RunAgentInput.model_validate_json(await request.body())
        except ValidationError:
            return JSONResponse({"error": {"code": "INVALID_RUN_INPUT"}}, status_code=422)
        thread_id, run_id = run_input.thread_id, run_input.run_id
        if run_input.resume:
            call_id = last_call(run_input)
            answered = [entry.interrupt_id for entry in run_input.resume]
            if call_id is None or answered != [interrupt_id(call_id)]:
                return JSONResponse({"error": {"code": "INVALID_RESUME"}}, status_code=422)
            resumed = await client.get_workflow_handle(thread_id).start_update(
                FloorCycleWorkflow.resume, 1, wait_for_stage=WorkflowUpdateStage.ACCEPTED
            )
            await resumed.result()
            events: list[BaseEvent] = [
                RunStartedEvent(thread_id=thread_id, run_id=run_id),
                RunFinishedEvent(
                    thread_id=thread_id, run_id=run_id, outcome=RunFinishedSuccessOutcome()
                ),
            ]
        else:
            if opens_thread(run_input):
                paused = await client.start_update_with_start_workflow(
                    FloorCycleWorkflow.pause,
                    0,
                    start_workflow_operation=WithStartWorkflowOperation(
                        FloorCycleWorkflow.run,
                        id=thread_id,
                        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
                        task_queue=TASK_QUEUE,
                    ),
                    wait_for_stage=WorkflowUpdateStage.ACCEPTED,
                )
            else:
                paused = await client.get_workflow_handle(thread_id).start_update(
                    FloorCycleWorkflow.pause, 0, wait_for_stage=WorkflowUpdateStage.ACCEPTED
                )
            await paused.result()
            call_id = f"call-{run_id}"
            interrupt = Interrupt(
                id=interrupt_id(call_id), reason="tool_call", tool_call_id=call_id
            )
            events = [
                RunStartedEvent(thread_id=thread_id, run_id=run_id),
                ToolCallStartEvent(
                    tool_call_id=call_id, tool_call_name=TOOL, parent_message_id=f"ask-{run_id}"
                ),
                ToolCallArgsEvent(tool_call_id=call_id, delta='{"to":"a@b.com"}'),
                ToolCallEndEvent(tool_call_id=call_id),
                RunFinishedEvent(
                    thread_id=thread_id,
                    run_id=run_id,
                    outcome=RunFinishedInterruptOutcome(interrupts=[interrupt]),
                ),
            ]
        body = "".join(encoder.encode(event) for event in events)
        return Response(body, media_type=encoder.get_content_type())

    return app


async def work(address: str) -> None:
    """The floor's worker: :class:`FloorCycleWorkflow` and its no-op tool, run as the
    engine's worker runs its workflows (``worker.WORKFLOW_RUNNER``), and the first build
    of a Worker Deployment, each workflow pinned to it, as ``make run``'s worker is
    (:func:`main` makes it current)."""
    client = await connected(address, DataConverter.default)
    version = WorkerDeploymentVersion(TASK_QUEUE, TASK_QUEUE)
    worker = Worker(
        client,
        task_queue=TASK_QUEUE,
        workflows=[FloorCycleWorkflow],
        activities=[noop_tool],
        workflow_runner=WORKFLOW_RUNNER,
        deployment_config=WorkerDeploymentConfig(
            version=version,
            use_worker_versioning=True,
            default_versioning_behavior=VersioningBehavior.PINNED,
        ),
    )
    stop_worker = asyncio.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        asyncio.get_running_loop().add_signal_handler(signum, stop_worker.set)
    async with worker:
        await stop_worker.wait()


async def serve(address: str, port: int) -> None:
    """The floor's HTTP server, on uvloop and httptools as the gateway's."""
    client = await connected(address, DataConverter.default)
    config = uvicorn.Config(
        create_app(client), host="127.0.0.1", port=port, log_level="warning", http="httptools"
    )
    await uvicorn.Server(config).serve()


async def main(port: int) -> None:
    """Start the dev server on a SQLite file in a directory of its own, its visibility
    indexes fitted as ``make run`` fits them, then the worker, whose build it makes
    current, and the HTTP server on ``port``; say where it listens, where its Temporal
    server and that server's metrics are (:mod:`bench.server_work`, :mod:`bench.hops`)
    and which processes to measure; stop them all, server last, when interrupted."""
    temporal_port, metrics_port = free_port(), free_port()
    address = f"127.0.0.1:{temporal_port}"
    this = [sys.executable, "-m", "bench.floor_server", "--address", address]
    started: list[asyncio.subprocess.Process] = []

    async def start(*argv: str) -> None:
        # The children's output goes to stderr: stdout carries the line that says where.
        started.append(
            await asyncio.create_subprocess_exec(
                *argv, cwd=ROOT, stdout=sys.stderr, start_new_session=True
            )
        )

    interrupted = asyncio.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        asyncio.get_running_loop().add_signal_handler(signum, interrupted.set)
    with tempfile.TemporaryDirectory(prefix="floor-") as data:
        try:
            database = Path(data) / "temporal.sqlite"
            await start(*server_argv(database, temporal_port), "--metrics-port", str(metrics_port))
            client = await connected(address, DataConverter.default)
            await fit_embedded_visibility_indexes(client, database)
            await start(*this, "--role", "worker")
            # Current before the floor is announced: the Worker Deployment's own workflows,
            # which make it so, run in the floor's namespace, and their tasks would count
            # in a reader's first cycles (``bench.server_work``).
            await promote_build(client, TASK_QUEUE, TASK_QUEUE)
            await start(*this, "--role", "http", "--port", str(port))
            await healthy(f"http://127.0.0.1:{port}", started)
            said = Announcement(
                url=f"http://127.0.0.1:{port}{PATH}",
                temporal=address,
                metrics=f"http://127.0.0.1:{metrics_port}/metrics",
                pids=tuple(process.pid for process in started),
            )
            print(said.line(), flush=True)
            await interrupted.wait()
        finally:
            for process in reversed(started):
                await stop(process)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8200)
    parser.add_argument("--role", choices=("all", "worker", "http"), default="all")
    parser.add_argument("--address", help="the dev server (the worker's and HTTP's roles)")
    args = parser.parse_args()
    if args.role == "worker":
        uvloop.run(work(args.address))
    elif args.role == "http":
        uvloop.run(serve(args.address, args.port))
    else:
        uvloop.run(main(args.port))
