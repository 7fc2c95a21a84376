"""What an open stream asks of Temporal: a run that ends before its first read costs no
read at all; while a run waits (on the model's next token, say) the gateway makes no
queries, yet what the run logs next reaches the client; a query still unanswered when
the run ends does not hold its stream back; and what a query answers leaves out the
conversation the client sent."""

from __future__ import annotations

import asyncio
from collections import Counter, defaultdict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from temporalio.client import (
    Client,
    FetchWorkflowHistoryEventsInput,
    Interceptor,
    OutboundInterceptor,
    QueryWorkflowInput,
    WorkflowHistoryEventAsyncIterator,
    WorkflowQueryFailedError,
)
from temporalio.service import RPCError

import bench.reads
from activities.openai_chat import OpenAIModel
from gateway import streaming
from tests.chat_server import ChatServer, Reply, ScriptedCall
from tests.helpers import (
    Stack,
    assert_valid_stream,
    eventually,
    new_thread,
    post_run_sse,
    run_input,
    serve_stack,
    sse_messages,
)
from workflows.models import EventPage
from workflows.runner import STALE_TIME
from workflows.sdk import tool
from workflows.sdk.agent import AgentDefinition
from workflows.sdk.tools import Approval
from workflows.thread_ids import workflow_id_for


class Reads(Interceptor):
    """The queries and history fetches made through a client, by workflow id; queries
    of the workflows in ``held`` wait until ``answer`` is set."""

    def __init__(self) -> None:
        self.queries: Counter[str] = Counter()
        self.waiting = 0
        """Queries waiting for their answer now, of any workflow."""
        self.failed = 0
        """Queries that failed with an ``RPCError``, of any workflow."""
        self.fetches: Counter[str] = Counter()
        self.fetched_from: defaultdict[str, list[bytes | None]] = defaultdict(list)
        """Where each history fetch began: a continuation token, or ``None`` for the
        start of the workflow run."""
        self.held: set[str] = set()
        self.held_runs: list[str | None] = []
        """The workflow run each held query was sent to."""
        self.answer = asyncio.Event()
        self.pages: defaultdict[str, list[EventPage]] = defaultdict(list)
        """What each ``events`` query answered."""
        self.to_refuse = 0
        """How many of the next reads of a thread's events (``events`` and ``log``
        queries) fail before they are sent, as a worker taking a thread over fails one
        (``workflows.runner``)."""

    def intercept_client(self, next: OutboundInterceptor) -> OutboundInterceptor:
        return _Counting(next, self)


class _Counting(OutboundInterceptor):
    def __init__(self, next: OutboundInterceptor, reads: Reads) -> None:
        super().__init__(next)
        self._reads = reads

    async def query_workflow(self, input: QueryWorkflowInput) -> Any:
        self._reads.queries[input.id] += 1
        self._reads.waiting += 1
        try:
            if input.id in self._reads.held:
                self._reads.held_runs.append(input.run_id)
                await self._reads.answer.wait()
            if input.query in ("events", "log") and self._reads.to_refuse:
                self._reads.to_refuse -= 1
                raise WorkflowQueryFailedError(STALE_TIME)
            answer = await self.next.query_workflow(input)
        except RPCError:
            self._reads.failed += 1
            raise
        finally:
            self._reads.waiting -= 1
        if isinstance(answer, EventPage):
            self._reads.pages[input.id].append(answer)
        return answer

    def fetch_workflow_history_events(
        self, input: FetchWorkflowHistoryEventsInput
    ) -> WorkflowHistoryEventAsyncIterator:
        self._reads.fetches[input.id] += 1
        self._reads.fetched_from[input.id].append(input.next_page_token)
        return self.next.fetch_workflow_history_events(input)


@pytest.fixture
async def counted(client: Client) -> AsyncIterator[tuple[ChatServer, Stack, Reads]]:
    """A local chat-completions server, and a stack serving the agent ``llm`` on it
    (with a ``lookup`` tool that needs approval) whose reads of Temporal are counted."""
    async with _counted(client) as counting:
        yield counting


@asynccontextmanager
async def _counted(
    client: Client, **settings_fields: Any
) -> AsyncIterator[tuple[ChatServer, Stack, Reads]]:
    reads = Reads()
    with ChatServer().serving() as server:
        agent = AgentDefinition(
            name="llm",
            description="An OpenAI-compatible model.",
            model=OpenAIModel(
                name="llm", model="local-model", base_url=server.base_url, api_key="k"
            ),
            tools=[lookup],
        )
        async with serve_stack(
            bench.reads.counted(client, reads), agents=[agent], **settings_fields
        ) as stack:
            try:
                yield server, stack, reads
            finally:
                reads.answer.set()


@tool(approval=Approval())
async def lookup(term: str) -> str:
    """What ``term`` means."""
    return f"{term}: a word"


def _text(events: list[dict[str, Any]]) -> str:
    return "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")


async def test_a_run_waiting_on_its_model_costs_no_queries_meanwhile(
    counted: tuple[ChatServer, Stack, Reads],
) -> None:
    server, stack, reads = counted
    server.script(Reply(text=["Hel", "lo ", "wor", "ld."], hold_after=2))
    thread_id = new_thread()
    held = workflow_id_for(thread_id)
    events: list[dict[str, Any]] = []
    body = run_input(thread_id, "r1", "hi")
    async with stack.http.stream("POST", "/agents/llm", json=body) as response:
        messages = sse_messages(response)
        while _text(events) != "Hello ":
            events.append((await anext(messages))[1])

        async def holding() -> bool:
            return server.holding

        async def watching() -> bool:
            # The first look at the history finds the tasks already done; the second waits.
            return reads.fetches[held] >= 2

        await eventually(holding, what="the model to be held midway")
        await eventually(watching, what="the stream to watch the thread's history")
        queries = reads.queries[held]
        # Time passes: other runs, on another thread, each a few poll intervals long.
        other = new_thread()
        for number in range(5):
            await post_run_sse(stack.http, "llm", run_input(other, f"o{number}", "hi"))
        assert reads.queries[held] == queries
        server.release()
        events += [event async for _, event in messages]

    assert _text(events) == "Hello world."
    assert_valid_stream(events, thread_id)


async def test_a_run_that_ends_before_its_first_read_costs_no_query(client: Client) -> None:
    # The first read far off: the run outlasts many poll intervals, and ends before it.
    async with _counted(client, stream_first_read_seconds=3600) as (server, stack, reads):
        server.script(Reply(text=["Hel", "lo ", "wor", "ld."], hold_after=2))
        thread_id = new_thread()
        held = workflow_id_for(thread_id)
        body = run_input(thread_id, "r1", "hi")
        async with stack.http.stream("POST", "/agents/llm", json=body) as response:

            async def holding() -> bool:
                return server.holding

            await eventually(holding, what="the model to be held midway")
            # Time passes: other runs, on another thread, each a few poll intervals long.
            other = new_thread()
            for number in range(5):
                await post_run_sse(stack.http, "llm", run_input(other, f"o{number}", "hi"))
            server.release()
            events = [event async for _, event in sse_messages(response)]

    assert _text(events) == "Hello world."
    assert_valid_stream(events, thread_id)
    assert reads.queries[held] == 0
    assert reads.fetches[held] == 0


async def test_a_quiet_stream_watches_the_history_from_where_the_last_one_left_it(
    client: Client,
) -> None:
    # The thread's runs share one workflow run, as under Worker Versioning, whose
    # history then holds every run before: only the first stream reads it from its start.
    async with _counted(client, continue_as_new_after_runs=100) as (server, stack, reads):
        thread_id = new_thread()
        watched = workflow_id_for(thread_id)
        replies = ["Hello world.", "Bye for now.", "See you soon."]
        for number, reply in enumerate(replies, 1):
            server.script(Reply(text=[reply[:4], reply[4:8], reply[8:]], hold_after=1))
            fetches = reads.fetches[watched]
            body = run_input(thread_id, f"r{number}", *[f"hi {n}" for n in range(1, number + 1)])
            async with stack.http.stream("POST", "/agents/llm", json=body) as response:
                messages = sse_messages(response)
                events = [(await anext(messages))[1]]
                while _text(events) != reply[:4]:
                    events.append((await anext(messages))[1])

                async def watching(fetches: int = fetches) -> bool:
                    return server.holding and reads.fetches[watched] >= fetches + 2

                await eventually(watching, what="the quiet stream to watch the history")
                server.release()
                events += [event async for _, event in messages]
            assert _text(events) == reply
            assert_valid_stream(events, thread_id)

    starts = reads.fetched_from[watched]
    assert starts[0] is None
    assert len(starts) >= 2 * len(replies)
    assert None not in starts[1:]


async def test_a_run_that_ends_while_its_stream_queries_it_ends_the_stream(
    counted: tuple[ChatServer, Stack, Reads], client: Client
) -> None:
    server, stack, reads = counted
    server.script(Reply(text=["Hel", "lo ", "wor", "ld."], hold_after=2))
    thread_id = new_thread()
    # The stream's queries go unanswered, as one that meets the run's continue-as-new
    # is for a while: the run's reply must end the stream anyway.
    reads.held.add(workflow_id_for(thread_id))
    body = run_input(thread_id, "r1", "hi")
    async with stack.http.stream("POST", "/agents/llm", json=body) as response:

        async def querying() -> bool:
            return server.holding and bool(reads.held_runs)

        await eventually(querying, what="the stream to query its run while the model waits")
        server.release()

        async def read_all() -> list[dict[str, Any]]:
            return [event async for _, event in sse_messages(response)]

        events = await asyncio.wait_for(read_all(), timeout=30)

    assert _text(events) == "Hello world."
    assert_valid_stream(events, thread_id)
    # Queries go to the workflow run the run was handed to, never to the next one.
    description = await client.get_workflow_handle(workflow_id_for(thread_id)).describe()
    assert set(reads.held_runs) == {
        description.raw_description.workflow_execution_info.first_run_id
    }


async def test_past_the_watch_limit_a_quiet_stream_polls_instead(
    counted: tuple[ChatServer, Stack, Reads], monkeypatch: pytest.MonkeyPatch
) -> None:
    server, stack, reads = counted
    monkeypatch.setattr(streaming._WATCHING, "free", 0)
    server.script(Reply(text=["Hel", "lo ", "wor", "ld."], hold_after=2))
    thread_id = new_thread()
    held = workflow_id_for(thread_id)
    events: list[dict[str, Any]] = []
    body = run_input(thread_id, "r1", "hi")
    async with stack.http.stream("POST", "/agents/llm", json=body) as response:
        messages = sse_messages(response)
        while _text(events) != "Hello ":
            events.append((await anext(messages))[1])
        queries = reads.queries[held]

        async def polling() -> bool:
            return server.holding and reads.queries[held] >= queries + 3

        await eventually(polling, what="the held stream to go on reading")
        server.release()
        events += [event async for _, event in messages]

    assert reads.fetches[held] == 0
    assert _text(events) == "Hello world."


async def test_a_follower_of_an_idle_thread_costs_no_queries_until_the_next_run(
    counted: tuple[ChatServer, Stack, Reads],
) -> None:
    _, stack, reads = counted
    thread_id = new_thread()
    followed = workflow_id_for(thread_id)
    first = await post_run_sse(stack.http, "llm", run_input(thread_id, "r1", "hi"))
    url = f"/threads/{thread_id}/events"
    async with stack.http.stream("GET", url, params={"after": first[-1][0]}) as response:
        messages = sse_messages(response)

        async def watching() -> bool:
            return reads.fetches[followed] >= 2

        await eventually(watching, what="the follower to watch the thread's history")
        queries = reads.queries[followed]
        other = new_thread()
        for number in range(5):
            await post_run_sse(stack.http, "llm", run_input(other, f"o{number}", "hi"))
        assert reads.queries[followed] == queries
        second = await post_run_sse(stack.http, "llm", run_input(thread_id, "r2", "hi", "again"))
        followed_run = [await anext(messages) for _ in second]

    assert followed_run == second


async def test_a_read_the_worker_refuses_is_read_again(
    counted: tuple[ChatServer, Stack, Reads],
) -> None:
    """A worker taking a thread over refuses to answer from a state it cannot vouch for
    (``workflows.runner``); the stream reads the run again rather than failing, and the
    model's first text, logged while the model holds the rest, reaches the client."""
    server, stack, reads = counted
    server.script(Reply(text=["Hel", "lo ", "wor", "ld."], hold_after=1))
    reads.to_refuse = 1
    body = run_input(new_thread(), "r1", "hi")
    async with stack.http.stream("POST", "/agents/llm", json=body) as response:
        messages = sse_messages(response)
        events = [(await anext(messages))[1]]
        while _text(events) != "Hel":
            events.append((await anext(messages))[1])
        assert reads.to_refuse == 0
        server.release()
        events += [event async for _, event in messages]

    assert _text(events) == "Hello world."
    assert_valid_stream(events, body["threadId"])


async def test_a_follower_reads_again_past_a_read_the_worker_refuses(
    counted: tuple[ChatServer, Stack, Reads],
) -> None:
    """A follower's read that a worker taking the thread over refuses is read again,
    not the end of the follower's stream: it gets the thread's next run whole."""
    _, stack, reads = counted
    thread_id = new_thread()
    first = await post_run_sse(stack.http, "llm", run_input(thread_id, "r1", "hi"))
    url = f"/threads/{thread_id}/events"
    async with stack.http.stream("GET", url, params={"after": first[-1][0]}) as response:
        # The request's own first read is behind it (refused, it would answer 503).
        reads.to_refuse = 1
        messages = sse_messages(response)
        second = await post_run_sse(stack.http, "llm", run_input(thread_id, "r2", "hi", "again"))
        followed_run = [await anext(messages) for _ in second]

    assert reads.to_refuse == 0
    assert followed_run == second


async def test_a_page_read_in_flight_leaves_out_the_conversation_the_client_sent(
    counted: tuple[ChatServer, Stack, Reads],
) -> None:
    server, stack, reads = counted
    server.script(
        Reply(tool_calls=[ScriptedCall("lookup", {"term": "quokka"})]),
        Reply(text=["A quokka ", "is a ", "marsupial."], hold_after=1),
    )
    thread_id = new_thread()
    held = workflow_id_for(thread_id)
    asked = [
        event
        for _, event in await post_run_sse(stack.http, "llm", run_input(thread_id, "r1", "quokka?"))
    ]
    (snapshot,) = [e for e in asked if e["type"] == "MESSAGES_SNAPSHOT"]
    (approval,) = asked[-1]["outcome"]["interrupts"]
    body = {
        "threadId": thread_id,
        "runId": "r2",
        "messages": snapshot["messages"],
        "resume": [
            {"interruptId": approval["id"], "status": "resolved", "payload": {"approved": True}}
        ],
    }
    async with stack.http.stream("POST", "/agents/llm", json=body) as response:
        messages = sse_messages(response)
        events = [(await anext(messages))[1]]
        while _text(events) != "A quokka ":
            events.append((await anext(messages))[1])
        server.release()
        events += [event async for _, event in messages]

    assert _text(events) == "A quokka is a marsupial."
    assert_valid_stream(events, thread_id)
    # The resume's first snapshot (the approved call in this run's view) was read while
    # the model was held, without the messages the client sent ...
    read = [page for page in reads.pages[held] if page.snapshot_prefix]
    assert read and all(page.snapshot_prefix == len(snapshot["messages"]) for page in read)
    in_flight = [
        item.event
        for page in read
        for item in page.events
        if item.event.type == "MESSAGES_SNAPSHOT"
    ]
    assert in_flight and all(len(each.messages) < len(snapshot["messages"]) for each in in_flight)
    # ... and reached the client whole, as the thread has it.
    first = next(e for e in events if e["type"] == "MESSAGES_SNAPSHOT")
    assert first["messages"][: len(snapshot["messages"])] == snapshot["messages"]
    view = (await stack.http.get(f"/threads/{thread_id}")).json()
    assert first["messages"] == view["messages"][: len(first["messages"])]
