"""A run records only the messages its thread lacks (``workflows/known_messages.py``):
the gateway leaves out of the thread's update the conversation the thread already has,
and the thread's reply leaves it out of its snapshots; the client still gets every
snapshot whole. Where the client's conversation is not the thread's, the run is sent
again whole, and nothing of the first send is recorded."""

from __future__ import annotations

from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from tests.helpers import Stack, new_thread, post_run, run_histories, run_input, types
from workflows.models import RunReply, RunRequest


async def recorded_runs(client: Client, thread_id: str) -> list[tuple[RunRequest, RunReply]]:
    """Each run's update as the thread's history holds it: its request and its reply."""
    converter = client.data_converter
    requests: dict[str, RunRequest] = {}
    runs = []
    async for _, events in run_histories(client, thread_id):
        for event in events:
            if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
                accepted = event.workflow_execution_update_accepted_event_attributes
                payloads = accepted.accepted_request.input.args.payloads
                [request] = await converter.decode(payloads, [RunRequest])
                requests[accepted.protocol_instance_id] = request
            if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED:
                completed = event.workflow_execution_update_completed_event_attributes
                payloads = completed.outcome.success.payloads
                [reply] = await converter.decode(payloads, [RunReply])
                runs.append((requests[completed.meta.update_id], reply))
    return runs


def snapshots(events: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    return [event["messages"] for event in events if event["type"] == "MESSAGES_SNAPSHOT"]


async def thread_messages(stack: Stack, thread_id: str) -> list[dict[str, Any]]:
    response = await stack.http.get(f"/threads/{thread_id}")
    assert response.status_code == 200, response.text
    messages: list[dict[str, Any]] = response.json()["messages"]
    return messages


async def test_a_run_records_only_the_new_messages_and_the_client_gets_whole_snapshots(
    stack: Stack, client: Client
) -> None:
    thread_id = new_thread()
    first = await post_run(stack.http, "demo", run_input(thread_id, "r1", "hello"))
    [conversation] = snapshots(first)
    ask = {"id": "m2", "role": "user", "content": "mail a@b.com"}
    body = {"threadId": thread_id, "runId": "r2", "messages": [*conversation, ask]}
    paused = await post_run(stack.http, "demo", body)
    interrupt = paused[-1]["outcome"]["interrupts"][0]
    [conversation] = snapshots(paused)
    resume = [{"interruptId": interrupt["id"], "status": "resolved", "payload": {"approved": True}}]
    body = {"threadId": thread_id, "runId": "r3", "messages": conversation, "resume": resume}
    resumed = await post_run(stack.http, "demo", body)
    assert resumed[-1]["outcome"] == {"type": "success"}, types(resumed)

    # The client got every snapshot whole: the conversation as the thread has it then.
    whole = await thread_messages(stack, thread_id)
    assert [len(s) for s in snapshots(resumed)] == [len(conversation), len(whole)]
    assert snapshots(resumed)[-1] == whole
    assert [m["id"] for m in snapshots(paused)[0]][:3] == ["m1", first_reply_id(first), "m2"]

    (_, reply1), (request2, reply2), (request3, reply3) = await recorded_runs(client, thread_id)
    # The first run is the thread's first: everything is new, and all of it went.
    assert reply1.snapshot_prefix is None
    # The second carried only the new message; the third (the resume) none at all.
    assert [m.id for m in request2.input.messages] == ["m2"]
    assert request2.known is not None and request2.known.count == 2
    assert request3.input.messages == []
    assert request3.known is not None and request3.known.count == len(conversation)
    # Their replies left out what the client sent, and kept what the run added.
    assert reply2.snapshot_prefix == 2
    assert reply3.snapshot_prefix == len(conversation)
    recorded = [
        item.event.messages for item in reply3.events if item.event.type == "MESSAGES_SNAPSHOT"
    ]
    assert [len(messages) for messages in recorded] == [0, len(whole) - len(conversation)]
    assert [m.id for m in recorded[-1]] == [m["id"] for m in whole[len(conversation) :]]


def first_reply_id(events: list[dict[str, Any]]) -> str:
    [conversation] = snapshots(events)
    reply_id: str = conversation[1]["id"]
    return reply_id


async def test_a_client_whose_conversation_is_not_the_threads_gets_the_run_sent_whole(
    stack: Stack, client: Client
) -> None:
    thread_id = new_thread()
    [conversation] = snapshots(await post_run(stack.http, "demo", run_input(thread_id, "r1", "hi")))
    edited = [conversation[0], {**conversation[1], "content": "I never said that."}]
    again = {"id": "m2", "role": "user", "content": "again"}
    body = {"threadId": thread_id, "runId": "r2", "messages": [*edited, again]}
    events = await post_run(stack.http, "demo", body)
    assert events[-1]["type"] == "RUN_FINISHED", types(events)
    assert events[-1]["outcome"] == {"type": "success"}

    # The thread kept its own reply, and the snapshot says so.
    whole = await thread_messages(stack, thread_id)
    assert whole[1] == conversation[1]
    assert snapshots(events)[-1] == whole
    # The update the thread took is the whole conversation; the first send left nothing.
    runs = await recorded_runs(client, thread_id)
    assert len(runs) == 2
    request, reply = runs[-1]
    assert request.known is None
    assert [m.id for m in request.input.messages] == ["m1", conversation[1]["id"], "m2"]
    assert reply.snapshot_prefix is None
