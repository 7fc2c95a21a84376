"""Encryption of what threads store in Temporal (``codec.py``), on a real server.

A thread's raw history, as Temporal holds it and anyone with access to the server reads
it without the codec, holds none of a conversation's words, a tool's arguments or an
answer; the codec reads them all back. Keys rotate: threads paused under an old key stay
readable and resumable under the new one, and a key that goes missing loses nothing.
"""

from __future__ import annotations

import base64
import uuid
from datetime import datetime
from typing import Any

from google.protobuf.message import Message
from temporalio.api.common.v1 import Payload
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import History
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.exceptions import ApplicationError

import codec
from activities.chat import ChatReply, ChatRequest, ScriptedModel
from gateway.streaming import thread_handle
from settings import Settings
from tests.helpers import (
    OWNER,
    TEST_PAYLOAD_KEYS,
    Stack,
    eventually,
    new_thread,
    post_run,
    run_histories,
    run_input,
    serve_stack,
)
from workflows import search_attributes
from workflows.sdk import AgentDefinition
from workflows.thread_ids import workflow_id_for

K1 = "k1:" + base64.b64encode(b"rotation-test-key-number-one-001").decode()
K2 = "k2:" + base64.b64encode(b"rotation-test-key-number-two-002").decode()
WORDS = ("zanzibar", "marmalade", "quokka", "periwinkle", "xylophone")
"""Words of one conversation: its message, the tool call's arguments, the answer."""


def keyed(client: Client, keys: str | None) -> Client:
    """A client of ``client``'s server whose data converter encrypts with ``keys``
    (none: the converter of a deployment without encryption)."""
    converter = Settings(payload_keys=keys).data_converter()
    return Client(client.service_client, namespace=client.namespace, data_converter=converter)


def raw(client: Client) -> Client:
    """A client that reads what Temporal stores as it is: no codec."""
    return Client(
        client.service_client, namespace=client.namespace, data_converter=pydantic_data_converter
    )


PLAINTEXT = {"temporal.api.common.v1.SearchAttributes", "temporal.api.common.v1.Header"}
"""What the codec leaves plaintext on purpose: search attributes (the server indexes
them) and headers (tracing context)."""


def payloads(message: Message, *, plaintext: bool = False) -> list[Payload]:
    """Every payload in ``message``, at any depth (as references, so they can be changed
    in place); with ``plaintext``, those in :data:`PLAINTEXT` too."""
    if isinstance(message, Payload):
        return [message]
    if not plaintext and message.DESCRIPTOR.full_name in PLAINTEXT:
        return []
    found: list[Payload] = []
    for field, value in message.ListFields():
        if field.type != field.TYPE_MESSAGE:
            continue
        if field.message_type.GetOptions().map_entry:
            if field.message_type.fields_by_name["value"].type == field.TYPE_MESSAGE:
                for item in value.values():
                    found += payloads(item, plaintext=plaintext)
        elif field.is_repeated:
            for item in value:
                found += payloads(item, plaintext=plaintext)
        else:
            found += payloads(value, plaintext=plaintext)
    return found


def decrypted(message: Message, keys: codec.Encryption) -> Message:
    """``message`` with every payload in it decrypted in place, as the codec server does
    for the Web UI."""
    for payload in payloads(message):
        payload.CopyFrom(keys.decrypt(payload))
    return message


async def histories(client: Client, thread_id: str) -> list[History]:
    """Every workflow run of the thread, as Temporal stores it; the runs the visibility
    store lists for the thread's workflow id are exactly those."""
    chain = [
        (run_id, History(events=events))
        async for run_id, events in run_histories(client, thread_id)
    ]
    query = f"WorkflowId = '{workflow_id_for(thread_id)}'"

    async def listed() -> bool:
        runs = {execution.run_id async for execution in client.list_workflows(query)}
        return runs == {run_id for run_id, _ in chain}

    await eventually(listed, what="the visibility store to list every run of the thread")
    return [history for _, history in chain]


def text_of(message: Message) -> str:
    """Everything ``message`` holds, as searchable text."""
    return message.SerializeToString().decode("latin-1").lower()


def shown(words: tuple[str, ...], message: Message) -> set[str]:
    text = text_of(message)
    return {word for word in words if word in text}


async def conversation(stack: Stack, thread_id: str) -> dict[str, Any]:
    """A run asking to mail someone (an approval of ``send_email``), then its approval
    with edited arguments; returns the approval as it was asked."""
    first = await post_run(
        stack.http,
        "demo",
        run_input(thread_id, "r1", "mail zanzibar@example.com about the marmalade"),
    )
    (approval,) = first[-1]["outcome"]["interrupts"]
    return dict(approval)


async def approve(stack: Stack, thread_id: str, approval: dict[str, Any]) -> None:
    edited = {"to": "quokka@example.com", "subject": "Periwinkle", "body": "xylophone"}
    entry = {
        "interruptId": approval["id"],
        "status": "resolved",
        "payload": {"approved": True, "editedArgs": edited},
    }
    body = {"threadId": thread_id, "runId": "r2", "messages": [], "resume": [entry]}
    events = await post_run(stack.http, "demo", body)
    assert events[-1]["outcome"] == {"type": "success"}


async def test_a_threads_history_holds_none_of_its_words_and_the_codec_reads_them(
    stack: Stack,
) -> None:
    assert stack.client is not None
    thread_id = new_thread()
    approval = await conversation(stack, thread_id)

    # While it waits: the memo that listings show is ciphertext without the codec ...
    query = f"WorkflowId = '{workflow_id_for(thread_id)}' AND ExecutionStatus = 'Running'"

    async def listed_waiting() -> bool:
        found = [each async for each in raw(stack.client).list_workflows(query)]
        return bool(found) and found[0].raw_info.memo.fields.get("interrupts") is not None

    await eventually(listed_waiting, what="the waiting thread in the visibility store")
    (listed,) = [each async for each in raw(stack.client).list_workflows(query)]
    assert not shown(WORDS, listed.raw_info)
    assert all(
        memo.metadata[codec.KEY_ID] == b"test" for memo in listed.raw_info.memo.fields.values()
    )
    # ... and the interrupt, its arguments included, with it.
    (through_codec,) = [each async for each in stack.client.list_workflows(query)]
    memo = await through_codec.memo()
    assert [each["id"] for each in memo["interrupts"]] == [approval["id"]]
    assert "zanzibar@example.com" in str(memo["interrupts"])

    await approve(stack, thread_id, approval)

    runs = await histories(raw(stack.client), thread_id)
    assert len(runs) == 3, "a continue-as-new after each of the two runs"
    for history in runs:
        assert not shown(WORDS, history)
        for payload in payloads(history):
            assert payload.metadata["encoding"] == codec.ENCODING
    keys = codec.Encryption(codec.PayloadKeys.parse(TEST_PAYLOAD_KEYS))
    readable = [decrypted(history, keys) for history in runs]
    assert set().union(*(shown(WORDS, history) for history in readable)) == set(WORDS)
    # The email went out with the edited arguments, as the first run's history says.
    assert shown(("quokka", "periwinkle", "xylophone"), readable[1])


async def test_the_search_attributes_hold_only_ids_enums_and_times(stack: Stack) -> None:
    assert stack.client is not None
    thread_id = new_thread()
    approval = await conversation(stack, thread_id)

    described = await thread_handle(raw(stack.client), thread_id).describe()
    fields = described.raw_description.workflow_execution_info.search_attributes.indexed_fields
    ours = {name for name in fields if name.startswith("Agui")}
    assert ours <= {key.name for key in search_attributes.ALL}
    assert not shown(WORDS, described.raw_description.workflow_execution_info.search_attributes)
    typed = described.typed_search_attributes
    assert typed.get(search_attributes.AGENT) == "demo"
    assert typed.get(search_attributes.OWNER) == OWNER
    assert typed.get(search_attributes.THREAD_STATUS) == "waiting"
    assert typed.get(search_attributes.INTERRUPT_IDS) == [approval["id"]]
    assert typed.get(search_attributes.INTERRUPT_REASONS) == ["tool_call"]
    assert isinstance(typed.get(search_attributes.LAST_ACTIVITY), datetime)
    assert typed.get(search_attributes.NEXT_EXPIRY) is None, "the approval never expires"
    assert typed.get(search_attributes.APPROVERS) == [f"u:{OWNER}"]


def failing(request: ChatRequest) -> ChatReply:
    """A model that fails quoting what it was told, as an error may."""
    raise ApplicationError(f"cannot answer {request.messages[-1].content}", non_retryable=True)


FAILING = AgentDefinition(
    name="failing",
    description="A model whose error quotes the conversation.",
    model=ScriptedModel("failing", failing),
)


async def test_a_failures_message_is_encrypted_too(client: Client) -> None:
    async with serve_stack(client, agents=[FAILING]) as stack:
        thread_id = new_thread()
        events = await post_run(stack.http, "failing", run_input(thread_id, "r1", "marmalade"))
        assert events[-1]["type"] == "RUN_ERROR"

        runs = await histories(raw(client), thread_id)
        failures = [
            event.activity_task_failed_event_attributes.failure
            for history in runs
            for event in history.events
            if event.HasField("activity_task_failed_event_attributes")
        ]
        assert failures and all(failure.message == "Encoded failure" for failure in failures)
        assert not any(shown(("marmalade",), history) for history in runs)
        keys = codec.Encryption(codec.PayloadKeys.parse(TEST_PAYLOAD_KEYS))
        assert shown(("marmalade",), decrypted(failures[0], keys))


async def test_keys_rotate_under_paused_threads(client: Client) -> None:
    task_queue = f"tq-{uuid.uuid4()}"
    thread_id = new_thread()
    async with serve_stack(keyed(client, K1), task_queue, payload_keys=K1) as stack:
        approval = await conversation(stack, thread_id)
        before = (await stack.http.get(f"/threads/{thread_id}")).json()

    rotated = f"{K2},{K1}"
    async with serve_stack(keyed(client, rotated), task_queue, payload_keys=rotated) as stack:
        response = await stack.http.get(f"/threads/{thread_id}")
        assert response.status_code == 200
        assert response.json()["interrupts"] == before["interrupts"]
        await approve(stack, thread_id, approval)
        assert (await stack.http.get(f"/threads/{thread_id}")).json()["status"] == "idle"

        runs = await histories(raw(client), thread_id)
    key_ids = [{bytes(p.metadata[codec.KEY_ID]) for p in payloads(history)} for history in runs]
    # The paused run was started under k1 and served its resume under k2; the run it
    # continued as is k2's alone.
    assert key_ids == [{b"k1"}, {b"k1", b"k2"}, {b"k2"}]


async def started(client: Client, thread_id: str) -> bool:
    """The thread's latest workflow run has completed its first workflow task."""
    history = await thread_handle(client, thread_id).fetch_history()
    return any(
        event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED for event in history.events
    )


async def test_a_missing_key_holds_the_thread_until_it_is_back(client: Client) -> None:
    task_queue = f"tq-{uuid.uuid4()}"
    thread_id = new_thread()
    async with serve_stack(keyed(client, K1), task_queue, payload_keys=K1) as stack:
        approval = await conversation(stack, thread_id)
        await eventually(lambda: started(client, thread_id), what="the waiting run's first task")

    async with serve_stack(keyed(client, K2), task_queue, payload_keys=K2) as stack:
        # (Before its first workflow task, a run's reads wait for it instead, and time out
        # as TEMPORAL_UNAVAILABLE.)
        response = await stack.http.get(f"/threads/{thread_id}")
        assert response.status_code == 503
        error = response.json()["error"]
        assert error["code"] == "THREAD_UNAVAILABLE"
        assert "k1" not in error["message"] and K1.split(":")[1] not in response.text
        assert response.headers["Retry-After"] == "1"
        # The worker retries the thread's task; the thread neither fails nor ends.
        described = await thread_handle(client, thread_id).describe()
        assert described.status == WorkflowExecutionStatus.RUNNING

    async with serve_stack(keyed(client, K1), task_queue, payload_keys=K1) as stack:
        await approve(stack, thread_id, approval)


async def test_without_keys_history_is_plain_and_enabling_keys_keeps_threads(
    client: Client,
) -> None:
    task_queue = f"tq-{uuid.uuid4()}"
    thread_id = new_thread()
    plain = keyed(client, None)
    async with serve_stack(plain, task_queue, payload_keys=None) as stack:
        approval = await conversation(stack, thread_id)
        (history, *_) = await histories(raw(client), thread_id)
        assert shown(("zanzibar", "marmalade"), history) == {"zanzibar", "marmalade"}
        assert {bytes(p.metadata["encoding"]) for p in payloads(history)} <= {
            b"json/plain",
            b"binary/null",
        }

    async with serve_stack(keyed(client, K1), task_queue, payload_keys=K1) as stack:
        await approve(stack, thread_id, approval)
        latest = (await histories(raw(client), thread_id))[-1]
    assert {bytes(p.metadata[codec.KEY_ID]) for p in payloads(latest)} == {b"k1"}
