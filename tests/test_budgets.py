"""No client or model input wedges or wipes a thread (``workflows/budgets.py``).

Each pathological input here once terminated a thread's workflow, or failed its workflow
task in a loop (every later run and read answering 503, a local activity's side effect
sent again on each retry), or stalled every thread of the worker. Now each gets a clear
error code; the gateway stays healthy, the thread readable, running and usable, its
interrupts as they were, and side effects happen once.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from typing import Any

import pytest
from ag_ui.core import Interrupt, ResumeEntry
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError

from gateway.streaming import thread_handle
from settings import process_settings
from tests.chat_server import ChatServer, Reply
from tests.helpers import (
    OWNER,
    Stack,
    eventually,
    history_chain,
    history_length,
    new_thread,
    post_run,
    run_histories,
    run_input,
    serve_stack,
    start_thread,
    types,
)
from tests.receiver import Receiver
from workflows import budgets, search_attributes
from workflows.agents import EXAMPLES
from workflows.agents.demo import DEMO
from workflows.errors import ErrorCode
from workflows.models import OperatorResume, RunRequest, ThreadState
from workflows.sdk import AgentContext, AgentDefinition, Ask, ChatReply, ScriptedModel
from workflows.thread import ThreadWorkflow

WORDS = "lorem ipsum dolor sit amet "


async def alive(stack: Stack, thread_id: str) -> dict[str, Any]:
    """The gateway is healthy and the thread readable, its workflow still running;
    returns the thread as ``GET /threads/{threadId}`` shows it."""
    assert stack.client is not None
    assert (await stack.http.get("/healthz")).status_code == 200
    response = await stack.http.get(f"/threads/{thread_id}")
    assert response.status_code == 200, response.text
    description = await thread_handle(stack.client, thread_id).describe()
    assert description.status == WorkflowExecutionStatus.RUNNING
    view: dict[str, Any] = response.json()
    return view


def resume_body(thread_id: str, run_id: str, entries: list[dict[str, Any]]) -> dict[str, Any]:
    return {"threadId": thread_id, "runId": run_id, "messages": [], "resume": entries}


def approve(interrupt: dict[str, Any]) -> dict[str, Any]:
    return {"interruptId": interrupt["id"], "status": "resolved", "payload": {"approved": True}}


def addresses(count: int, start: int = 0) -> str:
    return "mail " + " ".join(f"user{i}@example.com" for i in range(start, start + count))


def error_code(events: list[dict[str, Any]]) -> str:
    assert events[-1]["type"] == "RUN_ERROR", types(events)
    code: str = events[-1]["code"]
    return code


async def test_a_run_that_asks_too_much_opens_nothing_and_the_thread_goes_on(
    stack: Stack,
) -> None:
    thread_id = new_thread()
    events = await post_run(stack.http, "demo", run_input(thread_id, "r1", "mail a@b.com"))
    [first] = events[-1]["outcome"]["interrupts"]
    events = await post_run(stack.http, "demo", resume_body(thread_id, "r2", [approve(first)]))
    assert events[-1]["outcome"] == {"type": "success"}
    before = await alive(stack, thread_id)

    # 60 addresses, one approval each: over the budget of interrupts one run may open.
    too_many = addresses(60)
    events = await post_run(
        stack.http, "demo", run_input(thread_id, "r3", "mail a@b.com", too_many)
    )

    assert error_code(events) == ErrorCode.TOO_MANY_INTERRUPTS
    assert str(budgets.MAX_INTERRUPTS_PER_RUN) in events[-1]["message"]
    view = await alive(stack, thread_id)
    assert view["status"] == "idle"
    assert view["interrupts"] == []
    assert view["state"] == before["state"]
    assert [run["status"] for run in view["runs"]] == ["interrupted", "succeeded", "failed"]

    # Exactly the budget is fine: 20 open, all of them in the search attribute and inbox.
    events = await post_run(
        stack.http,
        "demo",
        run_input(thread_id, "r4", "mail a@b.com", too_many, addresses(20, start=100)),
    )
    opened = events[-1]["outcome"]["interrupts"]
    assert len(opened) == budgets.MAX_INTERRUPTS_PER_RUN
    view = await alive(stack, thread_id)
    assert [i["id"] for i in view["interrupts"]] == [i["id"] for i in opened]
    assert stack.client is not None
    described = await thread_handle(stack.client, thread_id).describe()
    ids = described.typed_search_attributes.get(search_attributes.INTERRUPT_IDS)
    assert ids == [i["id"] for i in opened]

    async def in_the_inbox() -> bool:
        page = (await stack.http.get("/interrupts", params={"limit": 1000})).json()
        listed = [i["interrupt"] for i in page["interrupts"] if i["threadId"] == thread_id]
        return sorted(listed, key=lambda i: i["id"]) == sorted(opened, key=lambda i: i["id"])

    await eventually(in_the_inbox, what="the inbox to list the thread's 20 interrupts")


ODD_QUESTIONS: dict[str, Ask[Any]] = {
    "overflowing-expiry": Ask("input_required", message="When?", expires=timedelta.max),
    "expiry-beyond-a-year": Ask("input_required", message="When?", expires=timedelta(days=400)),
    "too-many-reminders": Ask(
        "input_required",
        message="When?",
        expires=timedelta(days=3),
        remind_before=[timedelta(hours=hours) for hours in range(1, 8)],
    ),
    "huge-reminder": Ask(
        "input_required", message="When?", expires=timedelta(days=3), remind_before=[timedelta.max]
    ),
}
"""Questions agent code may ask but no thread can open, by ``forwardedProps.case``."""


async def ask_odd(ctx: AgentContext) -> None:
    """A confirmation, with the odd question ``forwardedProps.case`` names (agent code
    that passes on what it was given unchecked)."""
    props = ctx.input.forwarded_props
    case = props.get("case") if isinstance(props, dict) else None
    asks: list[Ask[Any]] = [Ask("confirmation", message="Sure?", response=bool)]
    if case in ODD_QUESTIONS:
        asks.append(ODD_QUESTIONS[case])
    await ctx.interrupt_all(asks)
    ctx.say("Done.")


ODD = AgentDefinition(
    name="odd",
    description="Asks what the test names.",
    model=ScriptedModel("odd", lambda _: ChatReply(text="unused")),
    turn=ask_odd,
)
LAX_DEMO = dataclasses.replace(DEMO, name="lax-demo", state=None)
"""The demo, taking any state: its turn then meets state of a type it does not expect."""


@pytest.fixture
async def lax(client: Client) -> AsyncIterator[Stack]:
    """The examples with :data:`ODD` and :data:`LAX_DEMO`."""
    async with serve_stack(client, agents=[*EXAMPLES, ODD, LAX_DEMO]) as served:
        yield served


@pytest.mark.parametrize("case", list(ODD_QUESTIONS))
async def test_a_question_the_thread_cannot_open_ends_the_run_and_opens_none(
    lax: Stack, case: str
) -> None:
    thread_id = new_thread()
    body = run_input(thread_id, "r1", "ask", forwardedProps={"case": case})

    events = await post_run(lax.http, "odd", body)

    assert error_code(events) == ErrorCode.INVALID_QUESTION
    view = await alive(lax, thread_id)
    # The confirmation asked together with it was not opened either.
    assert view["interrupts"] == []
    assert view["status"] == "idle"
    events = await post_run(lax.http, "odd", run_input(thread_id, "r2", "ask", "again"))
    [confirmation] = events[-1]["outcome"]["interrupts"]
    assert confirmation["reason"] == "confirmation"


@pytest.fixture
def mail(receiver: Receiver, monkeypatch: pytest.MonkeyPatch) -> Iterator[Receiver]:
    """The demo's ``send_email`` in this process posts to ``receiver``: the setting is
    read once per process, so it is read again with the variable set, and after."""
    monkeypatch.setenv("AGUI_DEMO_MAIL_URL", receiver.url)
    process_settings.cache_clear()
    yield receiver
    monkeypatch.undo()
    process_settings.cache_clear()


async def test_an_email_is_sent_once_when_the_turn_fails_after_sending_it(
    lax: Stack, mail: Receiver
) -> None:
    stack, client, receiver = lax, lax.client, mail
    assert client is not None
    thread_id = new_thread()
    # A state key of the type the demo does not expect: its turn fails after sending.
    body = run_input(thread_id, "r1", "mail a@b.com", state={"outbox": "not a list"})
    events = await post_run(stack.http, "lax-demo", body)
    [approval] = events[-1]["outcome"]["interrupts"]

    events = await post_run(
        stack.http, "lax-demo", resume_body(thread_id, "r2", [approve(approval)])
    )

    assert error_code(events) == ErrorCode.AGENT_FAILED
    assert len(receiver.deliveries) == 1
    view = await alive(stack, thread_id)
    assert view["state"] == {"outbox": "not a list"}
    events = await post_run(
        stack.http, "lax-demo", run_input(thread_id, "r3", "mail a@b.com", "hello")
    )
    assert events[-1]["outcome"] == {"type": "success"}
    assert len(receiver.deliveries) == 1
    # The tool is a regular activity: a retried workflow task does not run it again.
    assert "tool:send_email" in await scheduled_activities(client, thread_id)


async def scheduled_activities(client: Client, thread_id: str) -> list[str]:
    """The activities the thread scheduled, over all its workflow runs."""
    return [
        event.activity_task_scheduled_event_attributes.activity_type.name
        async for _, events in run_histories(client, thread_id)
        for event in events
        if event.HasField("activity_task_scheduled_event_attributes")
    ]


def big_text(size: int) -> str:
    return (WORDS * (size // len(WORDS) + 1))[:size]


@pytest.mark.parametrize(
    "extra",
    [
        {"messages": [{"id": "big", "role": "user", "content": big_text(200_000)}]},
        {
            "messages": [
                {"id": f"m-{i}", "role": "user", "content": big_text(120_000)} for i in range(7)
            ]
        },
        {"messages": [{"id": f"m-{i}", "role": "user", "content": "hi"} for i in range(1_001)]},
        {"state": {"blob": big_text(200_000)}},
        {
            "messages": [],
            "resume": [
                {"interruptId": "int-x", "status": "resolved", "payload": big_text(200_000)}
            ],
        },
    ],
    ids=["message", "input", "message-count", "state", "resume"],
)
async def test_input_over_its_budget_is_rejected_and_changes_nothing(
    stack: Stack, extra: dict[str, Any]
) -> None:
    assert stack.client is not None
    thread_id = new_thread()
    await post_run(stack.http, "demo", run_input(thread_id, "r1", "hello"))
    before = await alive(stack, thread_id)
    length = await history_length(stack.client, thread_id)

    events = await post_run(stack.http, "demo", {**run_input(thread_id, "r2"), **extra})

    assert error_code(events) == ErrorCode.INPUT_TOO_LARGE
    assert await alive(stack, thread_id) == before
    assert await history_length(stack.client, thread_id) == length


async def test_a_megabyte_message_is_rejected_by_the_workflow_itself(stack: Stack) -> None:
    """Whatever a gateway lets through: the update's validator rejects it."""
    assert stack.client is not None
    thread_id = new_thread()
    await post_run(stack.http, "demo", run_input(thread_id, "r1", "hello"))
    await alive(stack, thread_id)
    length = await history_length(stack.client, thread_id)
    body = run_input(thread_id, "r2", big_text(1_100_000))

    with pytest.raises(WorkflowUpdateFailedError) as failure:
        await thread_handle(stack.client, thread_id).execute_update(
            ThreadWorkflow.run_agent,
            RunRequest.model_validate({"agent": "demo", "input": body, "principal": OWNER}),
        )

    assert isinstance(failure.value.cause, ApplicationError)
    assert failure.value.cause.type == ErrorCode.INPUT_TOO_LARGE
    await alive(stack, thread_id)
    assert await history_length(stack.client, thread_id) == length


async def test_a_long_conversation_keeps_its_newest_messages_within_budget(
    stack: Stack,
) -> None:
    assert stack.client is not None
    thread_id = new_thread()
    # Six runs of ~100 KB messages (and as long echoes), sent one new message a time.
    # The client keeps the whole conversation, the agent's echoes included.
    conversation: list[dict[str, Any]] = []
    for index in range(1, 7):
        asked = {"id": f"m{index}", "role": "user", "content": big_text(100_000)}
        body = {"threadId": thread_id, "runId": f"r{index}", "messages": [asked]}
        events = await post_run(stack.http, "demo", body)
        assert events[-1]["outcome"] == {"type": "success"}
        snapshot = next(e for e in reversed(events) if e["type"] == "MESSAGES_SNAPSHOT")
        conversation += [asked, snapshot["messages"][-1]]
    events = await post_run(
        stack.http,
        "demo",
        {
            "threadId": thread_id,
            "runId": "r7",
            "messages": [{"id": "m7", "role": "user", "content": "mail a@b.com"}],
        },
    )
    [approval] = events[-1]["outcome"]["interrupts"]
    events = await post_run(stack.http, "demo", resume_body(thread_id, "r8", [approve(approval)]))
    assert events[-1]["outcome"] == {"type": "success"}

    view = await alive(stack, thread_id)
    kept = [message["id"] for message in view["messages"]]
    assert "m1" not in kept and "m7" in kept
    assert budgets.json_size(view["messages"]) <= budgets.KEPT_MESSAGES_BYTES
    # The snapshot the client got holds the same, newest, messages.
    snapshot = next(e for e in reversed(events) if e["type"] == "MESSAGES_SNAPSHOT")
    assert [m["id"] for m in snapshot["messages"]] == kept

    # A client resending a dropped message does not add it back.
    resent = {
        "threadId": thread_id,
        "runId": "r9",
        "messages": [
            {"id": "m1", "role": "user", "content": big_text(100_000)},
            {"id": "m9", "role": "user", "content": "hello"},
        ],
    }
    events = await post_run(stack.http, "demo", resent)
    assert events[-1]["outcome"] == {"type": "success"}
    kept = [message["id"] for message in (await alive(stack, thread_id))["messages"]]
    assert "m1" not in kept and kept[-2] == "m9"

    # Nor is one that resends the agent's dropped reply too, as a client that kept its
    # own copy of the conversation does, refused for it: a client may not write an
    # assistant message, but this one is the thread's own.
    echo = conversation[1]
    assert echo["role"] == "assistant" and echo["id"] not in kept
    resent_reply = [*conversation[:2], {"id": "m10", "role": "user", "content": "hello again"}]
    body = {"threadId": thread_id, "runId": "r10", "messages": resent_reply}
    events = await post_run(stack.http, "demo", body)
    assert events[-1].get("outcome") == {"type": "success"}, events[-1]
    kept = [message["id"] for message in (await alive(stack, thread_id))["messages"]]
    assert echo["id"] not in kept and kept[-2] == "m10"

    # What each workflow run started with (the carried thread) stayed well under 2 MB.
    chain = await history_chain(stack.client, thread_id)
    assert max(run.input_bytes for run in chain) < 1024 * 1024


async def test_a_long_message_is_scanned_promptly_and_other_threads_are_served_meanwhile(
    stack: Stack,
) -> None:
    long_thread, other_thread, late_thread = new_thread(), new_thread(), new_thread()
    # No "@": the demo's address pattern once took quadratic time on such a run of letters.
    long_run = post_run(stack.http, "demo", run_input(long_thread, "r1", "a" * 50_000))
    other_run = post_run(stack.http, "demo", run_input(other_thread, "r1", "hello"))

    long_events, other_events = await asyncio.gather(long_run, other_run)

    assert long_events[-1]["outcome"] == {"type": "success"}
    assert other_events[-1]["outcome"] == {"type": "success"}
    # Only the first SCANNED_CHARS characters are read: an address after them asks nothing.
    text = "x " * 2_500 + "mail late@example.com"
    events = await post_run(stack.http, "demo", run_input(late_thread, "r1", text))
    assert events[-1]["outcome"] == {"type": "success"}


async def test_a_model_streaming_many_deltas_is_sent_in_a_bounded_number_of_events(
    llm: tuple[ChatServer, Stack],
) -> None:
    server, stack = llm
    words = [f"w{i} " for i in range(600)]
    server.script(Reply(text=words, interval_seconds=0.002))
    thread_id = new_thread()

    events = await post_run(stack.http, "llm", run_input(thread_id, "r1", "talk"))

    assert events[-1]["outcome"] == {"type": "success"}
    deltas = [e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT"]
    assert "".join(deltas) == "".join(words)
    assert len(deltas) <= budgets.STREAMED_DELTAS_PER_REPLY + 1


async def test_a_model_reply_over_the_runs_budget_ends_the_run_and_the_thread_goes_on(
    llm: tuple[ChatServer, Stack],
) -> None:
    server, stack = llm
    server.script(Reply(text=["x" * (budgets.MAX_RUN_EVENT_BYTES + 1_000)]), Reply(text=["ok"]))
    thread_id = new_thread()

    events = await post_run(stack.http, "llm", run_input(thread_id, "r1", "talk"))

    assert error_code(events) == ErrorCode.OUTPUT_TOO_LARGE
    view = await alive(stack, thread_id)
    assert budgets.json_size(view) < 64 * 1024
    events = await post_run(stack.http, "llm", run_input(thread_id, "r2", "talk", "again"))
    assert events[-1]["outcome"] == {"type": "success"}
    assert json.dumps(events).count("x" * 1000) == 0


async def test_what_the_threads_own_code_fails_on_is_an_internal_error_not_a_stuck_thread(
    stack: Stack,
) -> None:
    """A thread carried from before the budgets, waiting on an interrupt whose schema is
    not a JSON Schema (refused when asked now): checking an answer to it raises inside
    the thread's code. The run is refused with ``INTERNAL``, an operator's signal is
    audited as rejected, and the interrupt can still be cancelled."""
    assert stack.client is not None
    thread_id = new_thread()
    legacy = Interrupt(id="int-legacy", reason="input_required", response_schema={"type": 5})
    carried = ThreadState(thread_id=thread_id, agent="demo", owner=OWNER, asked=[legacy])
    await start_thread(stack.client, stack.task_queue, thread_id, 1, state=carried)
    answer = {"interruptId": legacy.id, "status": "resolved", "payload": {"x": 1}}

    events = await post_run(stack.http, "demo", resume_body(thread_id, "r1", [answer]))

    assert error_code(events) == ErrorCode.INTERNAL
    assert [i["id"] for i in (await alive(stack, thread_id))["interrupts"]] == [legacy.id]
    signal = OperatorResume(operator="ops", resume=[ResumeEntry.model_validate(answer)])
    await thread_handle(stack.client, thread_id).signal(
        ThreadWorkflow.operator_resume_signal, signal
    )

    async def audited() -> bool:
        audit = (await alive(stack, thread_id))["audit"]
        return [(a["outcome"], a["errorCode"]) for a in audit] == [("rejected", "INTERNAL")]

    await eventually(audited, what="the rejected signal in the audit trail")
    cancel = {"interruptId": legacy.id, "status": "cancelled"}
    events = await post_run(stack.http, "demo", resume_body(thread_id, "r2", [cancel]))
    assert events[-1]["outcome"] == {"type": "success"}
    assert (await alive(stack, thread_id))["interrupts"] == []
