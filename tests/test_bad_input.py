"""Bad input gets a clear error and changes nothing on the thread."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from temporalio.client import WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError

from gateway.sent_messages import Resent
from gateway.streaming import thread_handle
from tests.helpers import OWNER, Stack, history_length, post_run, run_input, types
from workflows.errors import ErrorCode
from workflows.models import RunRequest
from workflows.thread import ThreadWorkflow

JSON = {"content-type": "application/json"}


async def started_thread(stack: Stack) -> tuple[str, dict[str, Any]]:
    """A thread with one finished run, and how it looks."""
    thread_id = f"thread-{uuid.uuid4()}"
    await post_run(stack.http, "demo", run_input(thread_id, "r1", "hello"))
    return thread_id, (await stack.http.get(f"/threads/{thread_id}")).json()


@pytest.mark.parametrize(
    ("path", "body", "status", "code"),
    [
        ("/agents/demo", b"{not json", 400, "MALFORMED_JSON"),
        ("/agents/demo", b'{"threadId": "t"}', 422, "INVALID_RUN_INPUT"),
        ("/agents/demo", b"[1, 2]", 422, "INVALID_RUN_INPUT"),
        ("/agents/nobody", None, 404, "UNKNOWN_AGENT"),
    ],
)
async def test_bad_requests_get_a_json_error_and_leave_the_thread_alone(
    stack: Stack, path: str, body: bytes | None, status: int, code: str
) -> None:
    assert stack.client is not None
    thread_id, before = await started_thread(stack)
    events_before = await history_length(stack.client, thread_id)
    content = body if body is not None else run_input(thread_id, "r2", "hi")

    if isinstance(content, bytes):
        response = await stack.http.post(
            path, content=content, headers={"content-type": "application/json"}
        )
    else:
        response = await stack.http.post(path, json=content)

    assert response.status_code == status
    error = response.json()["error"]
    assert error["code"] == code
    assert error["message"]
    assert (await stack.http.get(f"/threads/{thread_id}")).json() == before
    assert await history_length(stack.client, thread_id) == events_before


async def test_invalid_input_shape_names_the_failing_field(stack: Stack) -> None:
    response = await stack.http.post(
        "/agents/demo", json={"threadId": "t", "runId": "r", "messages": [{"id": "m"}]}
    )
    assert response.status_code == 422
    locations = [detail["loc"] for detail in response.json()["error"]["details"]]
    assert any(loc[:2] == ["messages", 0] for loc in locations)


async def test_a_bad_body_resending_messages_gets_the_details_of_the_body_as_sent(
    stack: Stack,
) -> None:
    # The gateway keeps the message as validated; sent again, it is taken as such.
    message = {"id": "m1", "role": "user", "content": "hello", "name": None}
    body = {"threadId": f"thread-{uuid.uuid4()}", "runId": "r1", "messages": [message]}
    await post_run(stack.http, "demo", body)
    bad = {"threadId": body["threadId"], "messages": [message, {"id": "m2"}]}

    response = await stack.http.post("/agents/demo", json=bad)

    assert response.status_code == 422
    details = response.json()["error"]["details"]
    assert any(detail["loc"][:2] == ["messages", 1] for detail in details)
    [missing] = [detail for detail in details if detail["loc"] == ["runId"]]
    assert missing["input"] == bad


async def test_a_bad_body_sending_back_the_last_snapshot_gets_the_details_of_the_body_as_sent(
    stack: Stack, resent: list[Resent | None]
) -> None:
    """The gateway reads a body that begins its messages with the snapshot it last sent
    without parsing those again (``SentMessageCache.resent``); what is wrong after them
    is reported for the body as sent, and the thread is left alone."""
    thread_id = f"thread-{uuid.uuid4()}"
    events = await post_run(stack.http, "demo", run_input(thread_id, "r1", "hello"))
    [adopted] = [e["messages"] for e in events if e["type"] == "MESSAGES_SNAPSHOT"]
    before = (await stack.http.get(f"/threads/{thread_id}")).json()
    bad = {"threadId": thread_id, "messages": [*adopted, {"id": "m2"}], "state": {}}
    body = json.dumps(bad, separators=(",", ":")).encode()
    malformed = body[:-1] + b',"runId":}'

    response = await stack.http.post("/agents/demo", content=body, headers=JSON)
    broken = await stack.http.post("/agents/demo", content=malformed, headers=JSON)

    # The malformed body's rest did not parse: it was read whole, for its error.
    assert [each is not None for each in resent] == [False, True, False]
    assert response.status_code == 422
    details = response.json()["error"]["details"]
    assert any(detail["loc"][:2] == ["messages", len(adopted)] for detail in details)
    [missing] = [detail for detail in details if detail["loc"] == ["runId"]]
    assert missing["input"] == bad
    assert broken.status_code == 400
    assert broken.json()["error"]["code"] == "MALFORMED_JSON"
    assert f"char {len(malformed) - 1}" in broken.json()["error"]["message"]
    assert (await stack.http.get(f"/threads/{thread_id}")).json() == before


async def test_state_that_is_not_an_object_is_a_run_error_and_changes_nothing(
    stack: Stack,
) -> None:
    assert stack.client is not None
    thread_id, before = await started_thread(stack)
    events_before = await history_length(stack.client, thread_id)

    events = await post_run(
        stack.http, "demo", run_input(thread_id, "r2", "hi", state=["not", "an", "object"])
    )

    assert types(events) == ["RUN_STARTED", "RUN_ERROR"]
    assert events[1]["code"] == ErrorCode.INVALID_STATE
    assert (await stack.http.get(f"/threads/{thread_id}")).json() == before
    # The update's validator rejected it: nothing was written to the history.
    assert await history_length(stack.client, thread_id) == events_before


@pytest.mark.parametrize(
    ("agent", "thread_override", "code"),
    [
        ("someone-else", None, ErrorCode.AGENT_MISMATCH),
        ("demo", "another-thread", ErrorCode.THREAD_MISMATCH),
    ],
)
async def test_the_workflow_rejects_runs_for_another_agent_or_thread(
    stack: Stack, agent: str, thread_override: str | None, code: ErrorCode
) -> None:
    assert stack.client is not None
    thread_id, before = await started_thread(stack)
    events_before = await history_length(stack.client, thread_id)
    body = run_input(thread_override or thread_id, "r2", "hi")
    handle = thread_handle(stack.client, thread_id)

    with pytest.raises(WorkflowUpdateFailedError) as failure:
        await handle.execute_update(
            ThreadWorkflow.run_agent,
            RunRequest.model_validate({"agent": agent, "input": body, "principal": OWNER}),
        )

    cause = failure.value.cause
    assert isinstance(cause, ApplicationError)
    assert cause.type == code
    assert (await stack.http.get(f"/threads/{thread_id}")).json() == before
    assert await history_length(stack.client, thread_id) == events_before


async def test_an_unknown_thread_is_a_404(stack: Stack) -> None:
    response = await stack.http.get(f"/threads/never-{uuid.uuid4()}")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "UNKNOWN_THREAD"
