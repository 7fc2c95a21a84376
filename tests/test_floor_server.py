"""``python -m bench.floor_server``: the interrupt cycle's floor, served over AG-UI to the
side-by-side client (``docs/bench.md``, "The floor against the peer"), speaks the
contract that client relies on, asks of Temporal what the floor cycle does and no more,
and takes its processes down with it."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path
from typing import Any

import httpx
from temporalio.client import Client

from bench.floor_server import PATH, Announcement
from bench.hops import floor_workflow_id, measure_hops
from bench.server_work import ServerWork, settled_work
from bench.stack import free_port
from settings import EMBEDDED_QUERIED_COLUMNS
from tests.helpers import new_thread, post_run
from tests.processes import ROOT
from tests.test_hops import assert_cycle_hops
from tests.test_run_script import indexed_columns

STARTUP_SECONDS = 60.0
Message = dict[str, Any]


def outcome(events: list[dict[str, Any]]) -> dict[str, Any]:
    finished = events[-1]
    assert finished["type"] == "RUN_FINISHED", events
    result: dict[str, Any] = finished["outcome"]
    return result


def db_filename(pid: int) -> Path:
    """The SQLite file of the dev server running as ``pid``, from its command line."""
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
    return Path(argv[argv.index("--db-filename") + 1])


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def cycle(http: httpx.AsyncClient, thread_id: str, history: list[Message]) -> list[Message]:
    """A run that asks, then its resume, as the side-by-side client sends them; returns
    the conversation after it. A resume naming another interrupt is refused first."""
    turn = len(history)
    asked = {"id": f"u{turn}", "role": "user", "content": "email a@b.com"}
    history = [*history, asked]
    run = {"threadId": thread_id, "runId": f"r{turn}", "messages": history}
    [interrupt] = outcome(await post_run(http, "floor", run))["interrupts"]
    assert interrupt["reason"] == "tool_call"
    call_id = interrupt["toolCallId"]
    assert call_id not in {
        call["id"] for message in history for call in message.get("toolCalls", ())
    }
    function = {"name": "send_email", "arguments": '{"to":"a@b.com"}'}
    call = {"id": call_id, "type": "function", "function": function}
    history = [*history, {"id": f"ask{turn}", "role": "assistant", "toolCalls": [call]}]

    def resume(interrupt_id: str) -> dict[str, Any]:
        entry = {"interruptId": interrupt_id, "status": "resolved", "payload": {}}
        run_id = f"r{turn}-resume"
        return {"threadId": thread_id, "runId": run_id, "messages": history, "resume": [entry]}

    wrong = await http.post(PATH, json=resume("approve-another"))
    assert wrong.status_code == 422
    assert wrong.json() == {"error": {"code": "INVALID_RESUME"}}
    assert outcome(await post_run(http, "floor", resume(interrupt["id"]))) == {"type": "success"}
    return history


async def test_the_floor_serves_the_side_by_side_cycle_and_stops_with_its_processes() -> None:
    port = free_port()
    floor = await asyncio.create_subprocess_exec(
        sys.executable,
        *("-m", "bench.floor_server", "--port", str(port)),
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
    )
    assert floor.stdout is not None
    processes: list[int] = []
    try:
        line = (await asyncio.wait_for(floor.stdout.readline(), STARTUP_SECONDS)).decode()
        said = Announcement.parse(line)
        assert said.url == f"http://127.0.0.1:{port}{PATH}"
        temporal, metrics = said.temporal, said.metrics
        processes = list(said.pids)  # Temporal, worker, HTTP
        assert len(processes) == 3
        # The floor's server file is indexed as ``make run``'s, less the engine's attributes.
        assert indexed_columns(db_filename(processes[0])) == EMBEDDED_QUERIED_COLUMNS

        thread_id = new_thread()
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:
            before = await settled_work(metrics)
            history = await cycle(http, thread_id, [])
            fresh = await settled_work(metrics)
            # The next turn of the conversation goes to the thread's workflow as a plain
            # update, which sets nothing the thread's visibility record holds.
            await cycle(http, thread_id, history)
            growing = await settled_work(metrics)
            # ``python -m bench.hops --floor`` reads the floor's cycles from its server.
            hops = await measure_hops(
                http, await Client.connect(temporal), PATH, floor_workflow_id, cycles=2, warmup=0
            )
    finally:
        floor.send_signal(signal.SIGINT)
        await asyncio.wait_for(floor.wait(), STARTUP_SECONDS)
    assert fresh - before == ServerWork(
        workflow_tasks=3, activity_tasks=1, state_writes=7, visibility_writes=2
    )
    assert growing - fresh == ServerWork(workflow_tasks=3, activity_tasks=1, state_writes=5)
    assert_cycle_hops(hops, tool=["ACTIVITY_TASK_SCHEDULED", "ACTIVITY_TASK_COMPLETED"])
    assert floor.returncode == 0
    assert not [pid for pid in processes if alive(pid)]
