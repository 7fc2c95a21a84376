"""Large payloads stored compressed (``codec.py``, ``AGUI_COMPRESS_PAYLOADS_FROM``), on a
real server: what a thread carries across a continue-as-new is compressed in its history,
and every process reads it back whether it compresses or not."""

from __future__ import annotations

import uuid

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

import codec
from settings import Settings
from tests.helpers import new_thread, post_run, run_histories, run_input, serve_stack
from workflows.thread import ThreadWorkflow
from workflows.thread_ids import workflow_id_for

FROM = 4096
LONG = "Please mail ada@example.com the minutes: " + "the committee met and agreed. " * 400
"""A message of some 12 KB, which a thread then carries in its state."""


def compressing(client: Client, compress_from: int | None) -> Client:
    """A client of ``client``'s server whose converter compresses from ``compress_from``."""
    converter = Settings(payload_keys=None, compress_payloads_from=compress_from).data_converter()
    return Client(client.service_client, namespace=client.namespace, data_converter=converter)


async def test_a_carried_conversation_is_compressed_and_read_back_whole(client: Client) -> None:
    task_queue = f"tq-{uuid.uuid4()}"
    thread_id = new_thread()
    async with serve_stack(
        compressing(client, FROM), task_queue, payload_keys=None, compress_payloads_from=FROM
    ) as stack:
        paused = await post_run(stack.http, "demo", run_input(thread_id, "r1", LONG))
        (approval,) = paused[-1]["outcome"]["interrupts"]
        # A query's answer is never stored, so never compressed: a reader without the
        # codec gets the thread's view as JSON.
        raw = Client(
            client.service_client,
            namespace=client.namespace,
            data_converter=pydantic_data_converter,
        )
        thread = raw.get_workflow_handle(workflow_id_for(thread_id))
        view = await thread.query(ThreadWorkflow.view)
        assert view.messages[0].content == LONG

    [(_, first), (_, second)] = [run async for run in run_histories(raw, thread_id)]
    continued = first[-1].workflow_execution_continued_as_new_event_attributes
    (carried,) = continued.input.payloads
    (started,) = second[0].workflow_execution_started_event_attributes.input.payloads
    for payload in (carried, started):
        assert payload.metadata["encoding"] == codec.COMPRESSED
        assert len(payload.data) < len(LONG) / 4
    assert b"the committee met" not in carried.data

    # A deployment that does not compress (set back, or not yet set) still reads it.
    async with serve_stack(
        compressing(client, None), task_queue, payload_keys=None, compress_payloads_from=None
    ) as stack:
        body = {
            "threadId": thread_id,
            "runId": "r2",
            "messages": [],
            "resume": [
                {"interruptId": approval["id"], "status": "resolved", "payload": {"approved": True}}
            ],
        }
        resumed = await post_run(stack.http, "demo", body)
        assert resumed[-1]["outcome"] == {"type": "success"}
        view = (await stack.http.get(f"/threads/{thread_id}")).json()
    assert view["messages"][0]["content"] == LONG
    assert [mail["to"] for mail in view["state"]["outbox"]] == ["ada@example.com"]

    [*_, (_, latest)] = [run async for run in run_histories(raw, thread_id)]
    assert latest[0].event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED
    (plain,) = latest[0].workflow_execution_started_event_attributes.input.payloads
    assert plain.metadata["encoding"] == b"json/plain"
