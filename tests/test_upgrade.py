"""A turn the demo paused before it was rebuilt on the SDK finishes on the old code.

The thread below carries the state the legacy demo left when it paused on an approval
(interrupts asked, no SDK journal), as a thread that continued as new before the
upgrade does. Resumed under the current code, the legacy agent completes the turn: its
``send_email`` runs with the legacy idempotency key (thread, call and approval), which
the SDK's tool would not use.
"""

from __future__ import annotations

import hashlib
import json
import uuid

from ag_ui.core import AssistantMessage, FunctionCall, Interrupt, ToolCall, UserMessage
from temporalio.client import Client

from gateway.streaming import workflow_id_for
from settings import Settings
from worker import build_worker
from workflows.agents.legacy_demo import APPROVE_WITH_EDITS_SCHEMA
from workflows.models import RunReply, RunRequest, ThreadStart, ThreadState
from workflows.thread import ThreadWorkflow


async def test_a_turn_paused_by_the_legacy_demo_finishes_on_it(client: Client) -> None:
    thread_id = f"thread-{uuid.uuid4()}"
    email = {"to": "a@b.com", "subject": "Hi", "body": "mail a@b.com"}
    call = ToolCall(
        id="tc-1", function=FunctionCall(name="send_email", arguments=json.dumps(email))
    )
    approval = Interrupt(
        id="int-1",
        reason="tool_call",
        tool_call_id=call.id,
        response_schema=APPROVE_WITH_EDITS_SCHEMA,
    )
    paused = ThreadState(
        thread_id=thread_id,
        agent="demo",
        messages=[
            UserMessage(id="m1", content="mail a@b.com"),
            AssistantMessage(id="a1", tool_calls=[call]),
        ],
        asked=[approval],
    )
    settings = Settings(task_queue=f"tq-{uuid.uuid4()}")
    async with build_worker(client, settings):
        thread = await client.start_workflow(
            ThreadWorkflow.run,
            ThreadStart(thread_id=thread_id, agent="demo", state=paused),
            id=workflow_id_for(thread_id),
            task_queue=settings.task_queue,
        )
        entry = {"interruptId": "int-1", "status": "resolved", "payload": {"approved": True}}
        body = {"threadId": thread_id, "runId": "r2", "messages": [], "resume": [entry]}
        reply: RunReply = await thread.execute_update(
            ThreadWorkflow.run_agent, RunRequest.model_validate({"agent": "demo", "input": body})
        )

    [result] = [
        json.loads(item.event.content)  # type: ignore[union-attr]
        for item in reply.events
        if item.event.type == "TOOL_CALL_RESULT"
    ]
    legacy_key = f"{workflow_id_for(thread_id)}/tc-1/int-1"
    assert result == {
        "sent": True,
        "messageId": f"msg-{hashlib.sha256(legacy_key.encode()).hexdigest()[:12]}",
    }
    outcome = reply.events[-1].event.outcome  # type: ignore[union-attr]
    assert outcome.type == "success"
