"""Threads that live long: continue-as-new keeps every promise, interrupts open or not."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import timedelta

import pytest
from ag_ui.core import Message, MessagesSnapshotEvent, RunAgentInput, UserMessage
from temporalio.client import Client, WorkflowHandle, WorkflowUpdateFailedError

from gateway.streaming import thread_handle
from settings import Settings
from tests.helpers import (
    LONG_LIVED,
    OWNER,
    Stack,
    eventually,
    history_chain,
    new_thread,
    post_run,
    read_sse,
    run_input,
    serve_stack,
    start_thread,
    types,
)
from worker import build_worker
from workflows.agents import EXAMPLES
from workflows.budgets import to_json
from workflows.errors import ErrorCode
from workflows.known_messages import message_digest, split
from workflows.models import RunReply, RunRequest
from workflows.thread import TRIM_AT_RUNS, ThreadWorkflow

CYCLES = 500


@pytest.fixture(scope="module")
async def eager(client: Client) -> AsyncIterator[Stack]:
    """A stack whose threads continue as new after every run."""
    async with serve_stack(client, continue_as_new_after_runs=1) as stack:
        yield stack


async def continued(client: Client, thread_id: str, times: int) -> None:
    """Wait until the thread's workflow has continued as new ``times`` times."""

    async def done() -> bool:
        return len(await history_chain(client, thread_id)) > times

    await eventually(done, what=f"{times} continue-as-new")


async def test_open_interrupts_cross_a_continue_as_new_unchanged(
    eager: Stack, client: Client
) -> None:
    thread_id = new_thread()
    body = run_input(
        thread_id, "r1", "mail a@example.com quarterly", forwardedProps={"expiresInSeconds": 3600}
    )
    first = await post_run(eager.http, "demo", body)
    interrupts = first[-1]["outcome"]["interrupts"]
    assert [i["reason"] for i in interrupts] == ["tool_call", "input_required"]
    await continued(client, thread_id, 1)

    # The new workflow run has the same interrupts (ids, reasons, absolute expiresAt) and
    # still serves the first run's events to a client that reconnects.
    view = (await eager.http.get(f"/threads/{thread_id}")).json()
    assert view["interrupts"] == interrupts
    async with eager.http.stream("GET", f"/threads/{thread_id}/runs/r1/events") as response:
        assert [event for _, event in await read_sse(response)] == first

    resume = {
        "threadId": thread_id,
        "runId": "r2",
        "messages": [],
        "resume": [
            {
                "interruptId": interrupts[0]["id"],
                "status": "resolved",
                "payload": {"approved": True},
            },
            {
                "interruptId": interrupts[1]["id"],
                "status": "resolved",
                "payload": {"quarter": "Q3", "year": 2026, "revenue": 5},
            },
        ],
    }
    second = await post_run(eager.http, "demo", resume)
    assert second[-1]["outcome"]["type"] == "success"
    reply = [e["delta"] for e in second if e["type"] == "TEXT_MESSAGE_CONTENT"]
    assert reply == ["Email to a@example.com: sent. Filed Q3 2026 with revenue 5."]
    await continued(client, thread_id, 2)

    # The resume replayed in the next workflow run: the same events, nothing sent twice.
    again = await post_run(eager.http, "demo", {**resume, "runId": "r3"})
    assert types(again) == types(second)
    view = (await eager.http.get(f"/threads/{thread_id}")).json()
    assert len(view["state"]["outbox"]) == 1
    assert view["status"] == "idle"


async def test_a_run_retried_after_a_continue_as_new_is_not_run_twice(
    eager: Stack, client: Client
) -> None:
    thread_id = new_thread()
    body = run_input(thread_id, "r1", "hello")
    first = await post_run(eager.http, "demo", body)
    await continued(client, thread_id, 1)
    assert await post_run(eager.http, "demo", body) == first
    view = (await eager.http.get(f"/threads/{thread_id}")).json()
    assert len(view["runs"]) == 1


async def test_a_thread_continued_after_a_run_is_read_at_once(eager: Stack, client: Client) -> None:
    """The server starts the next workflow run's first task at once, which a read of the
    thread (a query) waits for: with Temporal's default guard against loops of
    continue-as-new it held it until a second after the thread's start
    (``history.workflowIdReuseMinimalInterval`` in ``settings.EMBEDDED_DYNAMIC_CONFIG``)."""
    thread_id = new_thread()
    await post_run(eager.http, "demo", run_input(thread_id, "r1", "hello"))
    await continued(client, thread_id, 1)
    started = (await thread_handle(client, thread_id).fetch_history()).events[0]
    backoff = started.workflow_execution_started_event_attributes.first_workflow_task_backoff
    assert backoff.ToTimedelta() == timedelta(0)
    assert (await eager.http.get(f"/threads/{thread_id}")).status_code == 200


@dataclass
class Conversation:
    """A client of one thread, which sends each run as the gateway does: only the messages
    the thread does not have yet, after the digest of those it has
    (``workflows.known_messages``); so each run's update and reply stay the same size
    however long the conversation grows."""

    thread: WorkflowHandle[ThreadWorkflow, None]
    messages: list[Message] = field(default_factory=list)
    digests: list[bytes] = field(default_factory=list)

    async def run(self, body: dict[str, object], *added: Message) -> RunReply:
        """Run ``body`` with ``added`` after the conversation so far; take in the reply's
        last ``MESSAGES_SNAPSHOT``, which lacks the messages the request said it knew."""
        digests = [*self.digests, *(message_digest(to_json(m)) for m in added)]
        known, fresh = split([*self.messages, *added], digests)
        request = RunRequest(
            agent="demo",
            input=RunAgentInput.model_validate({**body, "messages": fresh}),
            principal=OWNER,
            known=known,
        )
        reply = await self.thread.execute_update(ThreadWorkflow.run_agent, request)
        *_, snapshot = (e.event for e in reply.events if isinstance(e.event, MessagesSnapshotEvent))
        kept = reply.snapshot_prefix or 0
        self.messages[kept:] = snapshot.messages
        self.digests[kept:] = [message_digest(to_json(m)) for m in snapshot.messages]
        return reply


async def test_a_thread_of_500_interrupt_cycles_continues_as_new_within_bounds(
    client: Client,
) -> None:
    settings = Settings(task_queue=f"tq-{uuid.uuid4()}")
    thread_id = new_thread()
    async with build_worker(client, settings, EXAMPLES):
        thread = await start_thread(client, settings.task_queue, thread_id, LONG_LIVED)
        conversation = Conversation(thread)
        first_resume: dict[str, object] = {}
        for cycle in range(CYCLES):
            asked = await conversation.run(
                {"threadId": thread_id, "runId": f"ask-{cycle}"},
                UserMessage(id=f"u{cycle}", role="user", content="confirm?"),
            )
            outcome = asked.events[-1].event.outcome  # type: ignore[union-attr]
            assert outcome.type == "interrupt", cycle
            resume: dict[str, object] = {
                "threadId": thread_id,
                "runId": f"answer-{cycle}",
                "resume": [
                    {"interruptId": outcome.interrupts[0].id, "status": "resolved", "payload": True}
                ],
            }
            answered = await conversation.run(resume)
            assert answered.events[-1].event.outcome.type == "success", cycle  # type: ignore[union-attr]
            first_resume = first_resume or resume

        view = await thread.query(ThreadWorkflow.view)
        assert len(view.messages) == 2 * CYCLES
        assert view.messages[-1].content == "Confirmed."
        # Each workflow run served up to LONG_LIVED runs but kept only the latest few.
        assert len(view.runs) < TRIM_AT_RUNS
        # The ledger crossed every continue-as-new: the first cycle's answer replays
        # harmlessly and cannot be changed.
        replayed = await conversation.run({**first_resume, "runId": "replay"})
        assert replayed.events[-1].event.outcome.type == "success"  # type: ignore[union-attr]
        assert len((await thread.query(ThreadWorkflow.view)).messages) == 2 * CYCLES
        changed = first_resume["resume"]
        assert isinstance(changed, list)
        with pytest.raises(WorkflowUpdateFailedError) as rejected:
            await conversation.run(
                {**first_resume, "runId": "change", "resume": [{**changed[0], "payload": False}]}
            )
        assert ErrorCode.INTERRUPT_ALREADY_ANSWERED in str(rejected.value.cause)

    chain = await history_chain(client, thread_id)
    for number, workflow_run in enumerate(chain, 1):
        print(
            f"workflow run {number}: {workflow_run.events} events, {workflow_run.bytes} bytes, "
            f"started with {workflow_run.input_bytes} bytes"
        )
    # 1,000 runs, at most 100 per workflow run (fewer when Temporal suggests it sooner).
    assert len(chain) > 2 * CYCLES // LONG_LIVED
    # Far below Temporal's warnings: 10,240 events or 10 MB a history, 512 KB a payload.
    assert all(w.events < 10_240 and w.bytes < 10 * 1024 * 1024 for w in chain)
    assert all(w.input_bytes < 512 * 1024 for w in chain)
