"""Waiting threads made as the engine's continue-as-new makes them.

After a run, a thread's workflow continues as new: the next workflow run starts with the
thread's state (``ThreadStart.state``), its memo and its search attributes, and waits. A
bench that needs many waiting threads starts each such workflow run itself, from one
that the engine made (:class:`Template`), with the thread's id replaced; the worker then
runs it as any waiting thread's. See ``bench/waiting.py``.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass

from temporalio.client import Client
from temporalio.common import TypedSearchAttributes
from temporalio.converter import decode_typed_search_attributes

from workflows.models import ThreadStart
from workflows.thread import ThreadWorkflow
from workflows.thread_ids import workflow_id_for

CONTINUED_SECONDS = 30.0
"""How long a thread may take to continue as new after its run."""


@dataclass(frozen=True)
class Template:
    """A waiting thread's workflow run as its continue-as-new started it."""

    thread_id: str
    start: str
    """Its ``ThreadStart``, as JSON."""
    memo: str
    """Its memo, as JSON."""
    search_attributes: TypedSearchAttributes
    task_queue: str


async def template_of(client: Client, thread_id: str) -> Template:
    """Thread ``thread_id``'s current workflow run, once it has continued as new after
    its paused run."""
    handle = client.get_workflow_handle(workflow_id_for(thread_id))
    deadline = time.monotonic() + CONTINUED_SECONDS
    while True:
        async for event in handle.fetch_history_events():
            started = event.workflow_execution_started_event_attributes
            break
        if started.continued_execution_run_id:
            break
        if time.monotonic() > deadline:
            raise RuntimeError(f"thread {thread_id} did not continue as new")
        await asyncio.sleep(0.1)
    [start] = await client.data_converter.decode(started.input.payloads, [ThreadStart])
    memo = {
        key: (await client.data_converter.decode([payload]))[0]
        for key, payload in started.memo.fields.items()
    }
    return Template(
        thread_id,
        start.model_dump_json(),
        json.dumps(memo),
        decode_typed_search_attributes(started.search_attributes),
        started.task_queue.name,
    )


async def continue_as(client: Client, template: Template, thread_id: str) -> None:
    """Start thread ``thread_id`` as ``template``'s continue-as-new started it.

    Thread ids are UUIDs, so replacing the template's in the JSON of the state and the
    memo replaces it wherever it appears (the state, its events) and nowhere else.
    """
    start = ThreadStart.model_validate_json(template.start.replace(template.thread_id, thread_id))
    await client.start_workflow(
        ThreadWorkflow.run,
        start,
        id=workflow_id_for(thread_id),
        task_queue=template.task_queue,
        memo=json.loads(template.memo.replace(template.thread_id, thread_id)),
        search_attributes=template.search_attributes,
    )


async def drained(client: Client, thread_ids: list[str]) -> None:
    """Wait until none of ``thread_ids`` has a workflow task waiting for the worker:
    each has run its first one, and waits."""
    for thread_id in thread_ids:
        handle = client.get_workflow_handle(workflow_id_for(thread_id))
        while (await handle.describe()).raw_description.HasField("pending_workflow_task"):
            await asyncio.sleep(0.05)
