"""End to end: AG-UI runs through the gateway, over real HTTP, on a real Temporal."""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio.client import Client

from gateway.sent_messages import Resent
from tests.helpers import Stack, new_thread, post_run, run_input, types
from workflows.agents import EXAMPLES
from workflows.thread_ids import workflow_id_for


async def workflow_count(client: Client, thread_id: str) -> int:
    """How many workflows the thread has had: chains of workflow runs, each continuing
    the one before it as new, count as one."""
    query = f'WorkflowId = "{workflow_id_for(thread_id)}"'
    return len({wf.raw_info.first_run_id async for wf in client.list_workflows(query)})


async def test_a_run_streams_the_reply_then_finishes_with_success(stack: Stack) -> None:
    thread_id = new_thread()
    events = await post_run(stack.http, "demo", run_input(thread_id, "r1", "hello"))

    assert types(events) == [
        "RUN_STARTED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "STATE_SNAPSHOT",
        "MESSAGES_SNAPSHOT",
        "RUN_FINISHED",
    ]
    started, finished = events[0], events[-1]
    assert (started["threadId"], started["runId"]) == (thread_id, "r1")
    assert finished == {**finished, "threadId": thread_id, "runId": "r1"}
    assert finished["outcome"] == {"type": "success"}
    reply_id = events[1]["messageId"]
    assert events[1]["role"] == "assistant"
    assert all(e["messageId"] == reply_id for e in events[1:6])
    assert "".join(e["delta"] for e in events[2:5]) == "You said: hello"
    assert events[7]["messages"] == [
        {"id": "m1", "role": "user", "content": "hello"},
        {"id": reply_id, "role": "assistant", "content": "You said: hello"},
    ]
    seqs = [e["timestamp"] for e in events]
    assert seqs == sorted(seqs)


async def test_runs_on_a_thread_share_one_workflow_and_messages_are_not_duplicated(
    stack: Stack,
) -> None:
    thread_id = new_thread()
    first = await post_run(stack.http, "demo", run_input(thread_id, "r1", "hello"))
    reply = first[-2]["messages"][-1]
    # AG-UI clients resend the whole conversation, the agent's reply included.
    body = run_input(thread_id, "r2", "hello", "again")
    body["messages"].insert(1, reply)
    second = await post_run(stack.http, "demo", body)

    assert second[-1]["outcome"] == {"type": "success"}
    thread = (await stack.http.get(f"/threads/{thread_id}")).json()
    ids = [message["id"] for message in thread["messages"]]
    assert ids == ["m1", reply["id"], "m2", second[1]["messageId"]]
    assert [run["runId"] for run in thread["runs"]] == ["r1", "r2"]
    assert [run["status"] for run in thread["runs"]] == ["succeeded", "succeeded"]
    assert thread["status"] == "idle"
    assert thread["interrupts"] == []
    assert stack.client is not None
    assert await workflow_count(stack.client, thread_id) == 1


async def test_a_client_sending_back_each_snapshot_as_written_is_read_after_it(
    stack: Stack, resent: list[Resent | None]
) -> None:
    """A client that adopts each run's ``MESSAGES_SNAPSHOT`` and sends it back, as
    ``@ag-ui/client`` does, gets its messages read from the snapshot the gateway kept
    (``SentMessageCache.resent``), through an approval, with the thread's conversation
    the client's."""
    thread_id = new_thread()
    messages: list[dict[str, Any]] = []

    async def turn(run_id: str, **fields: Any) -> list[dict[str, Any]]:
        nonlocal messages
        body = {"threadId": thread_id, "runId": run_id, "messages": messages, **fields}
        events = await post_run(stack.http, "demo", body)
        *_, snapshot = (e for e in events if e["type"] == "MESSAGES_SNAPSHOT")
        messages = snapshot["messages"]
        return events

    messages = [{"id": "m1", "role": "user", "content": "hello"}]
    await turn("r1")
    messages = [*messages, {"id": "m2", "role": "user", "content": "please mail a@b.com"}]
    [interrupt] = (await turn("r2"))[-1]["outcome"]["interrupts"]
    answer = {"interruptId": interrupt["id"], "status": "resolved", "payload": {"approved": True}}
    finished = await turn("r3", resume=[answer])

    assert finished[-1]["outcome"] == {"type": "success"}
    assert [len(each.snapshot.messages) if each else None for each in resent] == [None, 2, 4]
    thread = (await stack.http.get(f"/threads/{thread_id}")).json()
    assert thread["messages"] == messages
    roles = ["user", "assistant", "user", "assistant", "tool", "assistant"]
    assert [m["role"] for m in messages] == roles
    assert thread["state"]["outbox"] == [
        {"to": "a@b.com", "subject": "Hi", "body": "please mail a@b.com"}
    ]


async def test_a_run_that_looks_like_a_first_run_joins_the_thread_that_exists(
    stack: Stack,
) -> None:
    """The gateway sends a run without the agent's messages straight to update-with-start
    (``gateway.streaming.opens_thread``); on a thread that exists it is the thread's next
    run all the same."""
    thread_id = new_thread()
    first = await post_run(stack.http, "demo", run_input(thread_id, "r1", "hello"))
    second = await post_run(stack.http, "demo", run_input(thread_id, "r2", "hello", "again"))

    assert second[-1]["outcome"] == {"type": "success"}
    thread = (await stack.http.get(f"/threads/{thread_id}")).json()
    ids = [message["id"] for message in thread["messages"]]
    assert ids == ["m1", first[1]["messageId"], "m2", second[1]["messageId"]]
    assert [run["runId"] for run in thread["runs"]] == ["r1", "r2"]
    assert stack.client is not None
    assert await workflow_count(stack.client, thread_id) == 1


async def test_concurrent_first_runs_of_a_thread_start_one_workflow(stack: Stack) -> None:
    thread_id = new_thread()
    results = await asyncio.gather(
        *(post_run(stack.http, "demo", run_input(thread_id, f"r{i}", f"hi {i}")) for i in range(4))
    )

    assert all(events[-1]["outcome"] == {"type": "success"} for events in results)
    assert stack.client is not None
    assert await workflow_count(stack.client, thread_id) == 1
    thread = (await stack.http.get(f"/threads/{thread_id}")).json()
    assert sorted(run["runId"] for run in thread["runs"]) == ["r0", "r1", "r2", "r3"]


async def test_a_thread_whose_workflow_ended_starts_a_new_one_on_its_next_run(
    stack: Stack,
) -> None:
    thread_id = new_thread()
    await post_run(stack.http, "demo", run_input(thread_id, "r1", "hello"))
    assert stack.client is not None
    await stack.client.get_workflow_handle(workflow_id_for(thread_id)).terminate("test")

    events = await post_run(stack.http, "demo", run_input(thread_id, "r2", "again"))

    assert events[-1]["outcome"] == {"type": "success"}
    # A new workflow: the ended one's run is not part of the thread any more.
    thread = (await stack.http.get(f"/threads/{thread_id}")).json()
    assert [run["runId"] for run in thread["runs"]] == ["r2"]


async def test_a_repeated_request_replays_the_run_instead_of_running_it_again(
    stack: Stack,
) -> None:
    thread_id = new_thread()
    body = run_input(thread_id, "r1", "hello")
    first = await post_run(stack.http, "demo", body)
    again = await post_run(stack.http, "demo", body)

    assert again == first
    thread = (await stack.http.get(f"/threads/{thread_id}")).json()
    assert len(thread["runs"]) == 1
    assert len(thread["messages"]) == 2


async def test_thread_state_sent_by_the_client_is_kept_and_snapshotted(stack: Stack) -> None:
    # clarify declares no state, so it takes any JSON object.
    thread_id = new_thread()
    events = await post_run(
        stack.http, "clarify", run_input(thread_id, "r1", "hi", state={"theme": "dark"})
    )
    snapshot = next(e for e in events if e["type"] == "STATE_SNAPSHOT")
    assert snapshot["snapshot"] == {"theme": "dark"}

    # A later run without state keeps it; one with state merges its keys in.
    await post_run(stack.http, "clarify", run_input(thread_id, "r2", "hi"))
    events = await post_run(
        stack.http, "clarify", run_input(thread_id, "r3", "hi", state={"lang": "en"})
    )
    snapshot = next(e for e in events if e["type"] == "STATE_SNAPSHOT")
    assert snapshot["snapshot"] == {"theme": "dark", "lang": "en"}
    thread = (await stack.http.get(f"/threads/{thread_id}")).json()
    assert thread["state"] == {"theme": "dark", "lang": "en"}


async def test_agents_and_capabilities_are_listed(stack: Stack) -> None:
    listed = (await stack.http.get("/agents")).json()["agents"]
    # Every agent the stack was handed, in that order.
    assert [agent["name"] for agent in listed] == [agent.name for agent in EXAMPLES]

    response = await stack.http.get("/agents/demo/capabilities")
    assert response.status_code == 200
    assert response.json()["identity"]["name"] == "demo"
    assert response.json() == listed[0]["capabilities"]


async def test_healthz_reports_temporal_reachable(stack: Stack) -> None:
    response = await stack.http.get("/healthz")
    assert response.status_code == 200
    assert response.json()["status"] == "ok"
