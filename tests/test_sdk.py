"""The agent SDK's pieces, on the time-skipping test server.

Each test's worker serves the test agent it drives. The agents' model plays a plan the
user message spells out as JSON (one batch of tool calls per model turn, then a summary
of the results), and their tools count how often they run, so the tests can tell what
ran, what ran once, and what waited.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from datetime import timedelta
from typing import Any, Literal

import pytest
from pydantic import BaseModel
from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from activities.chat import ChatReply, ChatRequest, ProposedCall, ScriptedModel, tool_results
from activities.tooling import ToolInterrupt, tool, tool_context
from settings import CONTINUE_AS_NEW_AFTER_RUNS, Settings
from tests.helpers import LONG_LIVED, OWNER, start_thread
from worker import build_worker
from workflows.models import RunReply, RunRequest
from workflows.sdk import (
    AgentContext,
    AgentDefinition,
    Approval,
    Ask,
    ToolCallView,
    interrupt_tool,
)

RAN: Counter[str] = Counter()
"""Tool runs and model calls, by ``<thread>/<name>``."""

Thread = WorkflowHandle[Any, None]


def play(request: ChatRequest) -> ChatReply:
    """The next batch of the plan in the user message, or a summary of the results."""
    plan: list[list[dict[str, Any]]] = json.loads(request.messages[0].content)  # type: ignore[arg-type]
    turns = sum(1 for m in request.messages if m.role == "assistant" and m.tool_calls)
    RAN[f"{_thread(request)}/model"] += 1
    if turns < len(plan):
        return ChatReply(tool_calls=[ProposedCall(**call) for call in plan[turns]])
    return ChatReply(
        text=json.dumps(sorted(content for _, content in tool_results(request.messages)))
    )


def _thread(request: ChatRequest) -> str:
    return str(request.messages[0].id)


@tool
async def lookup(city: str) -> str:
    """Look a city up."""
    RAN[f"{tool_context().thread_id}/lookup"] += 1
    return f"{city}: sunny"


@tool
async def book(city: str, nights: int) -> str:
    """Book a hotel."""
    RAN[f"{tool_context().thread_id}/book"] += 1
    return f"booked {nights} nights in {city}"


@tool
async def pay(amount: float) -> str:
    """Pay, with the card the user gives (the answer is the result: *respond*)."""
    RAN[f"{tool_context().thread_id}/pay"] += 1
    raise ToolInterrupt(
        Ask("input_required", message=f"Which card for {amount}?", response={"type": "string"}),
        respond=True,
    )


@tool
async def tip(amount: float) -> str:
    """Tip, if the user says how much within the hour (the answer is the result)."""
    raise ToolInterrupt(
        Ask("input_required", message=f"Tip on {amount}?", expires=timedelta(hours=1)),
        respond=True,
    )


@interrupt_tool
def choose(options: list[str]) -> Ask[str]:
    """Let the user pick one of ``options``."""
    return Ask("input_required", message="Pick one", response={"enum": options})


class Guest(BaseModel):
    name: str
    age: int


async def ask_twice(ctx: AgentContext, call: ToolCallView) -> None:
    """Two questions, one at a time, the second depending on the first (a wizard)."""
    if call.name != "book":
        return
    guest = await ctx.interrupt(
        "input_required", message="Who stays?", response=Guest, tool_call_id=call.id
    )
    if guest.value is None:
        call.cancel("nobody stays")
        return
    size = await ctx.interrupt(
        "input_required",
        message=f"Room size for {guest.value.name}?",
        response=Literal["single", "double"],
        expires=timedelta(days=2),
    )
    if not size.resolved:
        call.cancel(f"no room size: {size.status}")
        return
    # Typed answers: a Guest, a literal.
    kind = type(guest.value).__name__
    ctx.memory[call.arguments["city"]] = f"{size.value} for {kind} {guest.value.name}"


async def audit(ctx: AgentContext, call: ToolCallView) -> None:
    """A second hook on the same event: it runs too, and may cancel."""
    ctx.state.setdefault("audited", [])
    if call.id not in ctx.state["audited"]:
        ctx.state["audited"].append(call.id)
    if call.arguments.get("city") == "Nowhere":
        call.cancel("Nowhere cannot be booked.")


async def one_for_all(ctx: AgentContext, calls: list[ToolCallView]) -> None:
    """One confirmation for a whole batch of bookings."""
    bookings = [call for call in calls if call.name == "book"]
    if len(bookings) < 2:
        return
    reply = await ctx.interrupt(
        "confirmation", message=f"Make {len(bookings)} bookings?", response=bool
    )
    if not reply.value:
        for call in bookings:
            call.cancel("The user declined the batch.")


def agent(name: str, **definition: Any) -> AgentDefinition:
    return AgentDefinition(
        name=name,
        description=name,
        model=ScriptedModel(name, play),
        tools=[lookup, book, pay, choose],
        **definition,
    )


async def no_paris(ctx: AgentContext, call: ToolCallView) -> None:
    """A tool's own hook: it sees only that tool's calls."""
    assert call.name == "lookup"
    if call.arguments["city"] == "Paris":
        call.cancel("Paris is not looked up.")


async def looked_up(ctx: AgentContext, call: ToolCallView, result: Any) -> None:
    ctx.state.setdefault("looked_up", []).append(result)


HOOKS = agent("sdk-hooks", before_tool=[ask_twice, audit])
PER_TOOL = AgentDefinition(
    name="sdk-per-tool",
    description="sdk-per-tool",
    model=ScriptedModel("sdk-per-tool", play),
    tools=[replace(lookup, before=[no_paris], after=[looked_up]), book, tip],
)
BATCH = agent("sdk-batch", before_batch=[one_for_all])
APPROVALS = AgentDefinition(
    name="sdk-approvals",
    description="sdk-approvals",
    model=ScriptedModel("sdk-approvals", play),
    # The same tool (one activity), gated for this agent only.
    tools=[
        lookup,
        replace(book, approval=Approval(edits=True, when=lambda args: args["nights"] > 2)),
        pay,
        choose,
    ],
)


class Session:
    """A thread of one test agent, driven through the workflow's update."""

    def __init__(
        self, env: WorkflowEnvironment, handle: Thread, agent: str, thread_id: str
    ) -> None:
        self.env = env
        self.handle = handle
        self.agent = agent
        self.thread_id = thread_id
        self._runs = 0

    async def send(self, body: dict[str, Any]) -> RunReply:
        self._runs += 1
        request = {
            "agent": self.agent,
            "input": {"threadId": self.thread_id, "runId": f"r{self._runs}", **body},
            "principal": OWNER,
        }
        return await self.handle.execute_update(
            "run_agent", RunRequest.model_validate(request), result_type=RunReply
        )

    async def plan(self, *batches: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Run the plan; the interrupts it ends on (JSON)."""
        message = {"id": self.thread_id, "role": "user", "content": json.dumps(list(batches))}
        return interrupts_of(await self.send({"messages": [message]}))

    async def answer(self, *entries: tuple[dict[str, Any], Any]) -> RunReply:
        resume = [
            {"interruptId": interrupt["id"], "status": "resolved", "payload": payload}
            for interrupt, payload in entries
        ]
        return await self.send({"messages": [], "resume": resume})

    def ran(self, name: str) -> int:
        return RAN[f"{self.thread_id}/{name}"]


def interrupts_of(reply: RunReply) -> list[dict[str, Any]]:
    outcome = reply.events[-1].event.outcome  # type: ignore[union-attr]
    if outcome.type != "interrupt":
        return []
    return [i.model_dump(mode="json", by_alias=True, exclude_none=True) for i in outcome.interrupts]


def results(reply: RunReply) -> dict[str, str]:
    return {
        item.event.tool_call_id: item.event.content  # type: ignore[union-attr]
        for item in reply.events
        if item.event.type == "TOOL_CALL_RESULT"
    }


def said(reply: RunReply) -> list[str]:
    text = "".join(i.event.delta for i in reply.events if i.event.type == "TEXT_MESSAGE_CONTENT")  # type: ignore[union-attr]
    return json.loads(text)  # type: ignore[no-any-return]


@asynccontextmanager
async def session(
    env: WorkflowEnvironment,
    defined: AgentDefinition,
    continue_after: int = CONTINUE_AS_NEW_AFTER_RUNS,
) -> AsyncIterator[Session]:
    settings = Settings(task_queue=f"tq-{uuid.uuid4()}")
    thread_id = f"thread-{uuid.uuid4()}"
    async with build_worker(env.client, settings, [defined]):
        handle = await start_thread(
            env.client, settings.task_queue, thread_id, continue_after, defined.name
        )
        yield Session(env, handle, defined.name, thread_id)


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


@pytest.mark.parametrize("continue_after", [LONG_LIVED, 1], ids=["same-run", "continued-as-new"])
async def test_a_batch_keeps_finished_results_and_waits_for_the_rest(
    skipping: WorkflowEnvironment, continue_after: int
) -> None:
    async with session(skipping, APPROVALS, continue_after) as thread:
        asked = await thread.plan(
            [
                call("lookup", city="Oslo"),
                call("book", city="Oslo", nights=3),
                call("book", city="Rome", nights=1),
            ]
        )
        # Only the risky booking waits; the lookup and the short booking ran.
        [approval] = asked
        assert approval["reason"] == "tool_call"
        assert approval["responseSchema"]["properties"]["editedArgs"]["required"] == [
            "city",
            "nights",
        ]
        assert (thread.ran("lookup"), thread.ran("book"), thread.ran("model")) == (1, 1, 1)

        edited = {"city": "Bergen", "nights": 4}
        done = await thread.answer((approval, {"approved": True, "editedArgs": edited}))

        # The result says a person changed the call, and to what.
        edited_result = results(done)[approval["toolCallId"]]
        shown = json.loads(edited_result)
        assert (shown["editedArgs"], shown["result"]) == (edited, "booked 4 nights in Bergen")
        assert shown["editedBy"] in ([], [OWNER]), "the owner, once the thread names deciders"
        assert list(results(done)) == [approval["toolCallId"]]
        assert said(done) == sorted(["Oslo: sunny", "booked 1 nights in Rome", edited_result])
        # Nothing that finished ran again; the model was asked once per complete batch.
        assert (thread.ran("lookup"), thread.ran("book"), thread.ran("model")) == (1, 2, 2)
        if continue_after == 1:
            first = thread.env.client.get_workflow_handle(
                thread.handle.id, run_id=thread.handle.first_execution_run_id
            )
            last = (await first.fetch_history()).events[-1]
            assert last.HasField("workflow_execution_continued_as_new_event_attributes")


async def test_hooks_all_run_and_a_hook_asks_one_question_at_a_time(
    skipping: WorkflowEnvironment,
) -> None:
    async with session(skipping, HOOKS) as thread:
        oslo, nowhere = await thread.plan(
            [call("book", city="Oslo", nights=1), call("book", city="Nowhere", nights=1)]
        )
        assert oslo["message"] == nowhere["message"] == "Who stays?"
        assert oslo["responseSchema"]["required"] == ["name", "age"]

        sizes = interrupts_of(
            await thread.answer(
                (oslo, {"name": "Ada", "age": 36}), (nowhere, {"name": "Bo", "age": 9})
            )
        )
        assert [i["message"] for i in sizes] == ["Room size for Ada?", "Room size for Bo?"]
        assert thread.ran("book") == 0
        done = await thread.answer((sizes[0], "double"), (sizes[1], "single"))

        assert results(done) == {
            oslo["toolCallId"]: "booked 1 nights in Oslo",
            nowhere["toolCallId"]: "Nowhere cannot be booked.",
        }
        assert thread.ran("book") == 1
        view = await thread.handle.query("view", result_type=dict)
        assert view["memory"] == {"Oslo": "double for Guest Ada", "Nowhere": "single for Guest Bo"}
        assert view["state"]["audited"] == [oslo["toolCallId"], nowhere["toolCallId"]]


async def test_a_question_left_unanswered_for_days_expires_and_the_turn_goes_on(
    skipping: WorkflowEnvironment,
) -> None:
    async with session(skipping, HOOKS, continue_after=1) as thread:
        [who] = await thread.plan([call("book", city="Oslo", nights=1)])
        [size] = interrupts_of(await thread.answer((who, {"name": "Ada", "age": 36})))
        assert size["expiresAt"].endswith("Z")

        await skipping.sleep(timedelta(days=2, minutes=1))

        view = await thread.handle.query("view", result_type=dict)
        assert view["interrupts"] == [] and view["status"] == "idle"
        contents = [m.get("content") for m in view["messages"]]
        assert "no room size: expired" in contents
        assert contents[-1] == json.dumps(["no room size: expired"])
        assert thread.ran("book") == 0


@pytest.mark.parametrize("confirmed", [True, False])
async def test_one_interrupt_before_the_batch_settles_all_its_calls(
    skipping: WorkflowEnvironment, confirmed: bool
) -> None:
    async with session(skipping, BATCH) as thread:
        [question] = await thread.plan(
            [
                call("book", city="Oslo", nights=1),
                call("book", city="Rome", nights=2),
                call("lookup", city="Oslo"),
            ]
        )
        assert question["reason"] == "confirmation" and question["responseSchema"] == {
            "type": "boolean"
        }
        assert thread.ran("lookup") == thread.ran("book") == 0

        done = await thread.answer((question, confirmed))

        booked = ["booked 1 nights in Oslo", "booked 2 nights in Rome"]
        declined = ["The user declined the batch."] * 2
        assert sorted(results(done).values()) == sorted(
            [*(booked if confirmed else declined), "Oslo: sunny"]
        )
        assert thread.ran("book") == (2 if confirmed else 0)


async def test_a_tool_asking_to_respond_gets_the_answer_as_its_result(
    skipping: WorkflowEnvironment,
) -> None:
    async with session(skipping, APPROVALS) as thread:
        [card] = await thread.plan([call("pay", amount=20)])
        assert card["reason"] == "input_required" and card["message"] == "Which card for 20.0?"
        assert card["toolCallId"]

        done = await thread.answer((card, "visa"))

        assert results(done) == {card["toolCallId"]: "visa"}
        assert thread.ran("pay") == 1


async def test_a_tools_own_hooks_see_only_its_calls(skipping: WorkflowEnvironment) -> None:
    async with session(skipping, PER_TOOL) as thread:
        plan = [
            call("lookup", city="Paris"),
            call("lookup", city="Oslo"),
            call("book", city="Oslo", nights=1),
        ]
        done = await thread.send(
            {"messages": [{"id": thread.thread_id, "role": "user", "content": json.dumps([plan])}]}
        )
        assert sorted(said(done)) == [
            "Oslo: sunny",
            "Paris is not looked up.",
            "booked 1 nights in Oslo",
        ]
        view = await thread.handle.query("view", result_type=dict)
        assert view["state"]["looked_up"] == ["Oslo: sunny"]


async def test_a_tools_question_has_a_deadline_like_any_other(
    skipping: WorkflowEnvironment,
) -> None:
    async with session(skipping, PER_TOOL, continue_after=1) as thread:
        [question] = await thread.plan([call("tip", amount=40)])
        assert question["message"] == "Tip on 40.0?" and question["expiresAt"].endswith("Z")

        await skipping.sleep(timedelta(hours=1, minutes=1))

        view = await thread.handle.query("view", result_type=dict)
        assert view["interrupts"] == [] and view["status"] == "idle"
        assert view["messages"][-1]["content"] == json.dumps(["Not run: the question was expired."])


async def test_a_cancelled_approval_does_not_run_the_tool(skipping: WorkflowEnvironment) -> None:
    async with session(skipping, APPROVALS) as thread:
        [approval] = await thread.plan([call("book", city="Oslo", nights=5)])
        entry = {"interruptId": approval["id"], "status": "cancelled"}
        done = await thread.send({"messages": [], "resume": [entry]})
        assert results(done) == {approval["toolCallId"]: "Not run: the question was cancelled."}
        assert thread.ran("book") == 0


async def test_invalid_arguments_from_the_model_are_its_to_read(
    skipping: WorkflowEnvironment,
) -> None:
    async with session(skipping, APPROVALS) as thread:
        reply = await thread.send(
            {
                "messages": [
                    {
                        "id": thread.thread_id,
                        "role": "user",
                        "content": json.dumps(
                            [[call("lookup", town="Oslo"), call("choose", choices=["a"])]]
                        ),
                    }
                ]
            }
        )

        [first, second] = [json.loads(content)["error"] for content in said(reply)]
        assert "Invalid arguments for" in first and "Invalid arguments for" in second
        assert interrupts_of(reply) == []
        assert thread.ran("lookup") == 0
