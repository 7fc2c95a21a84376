"""Where a thread workflow finds its agent: the agents its task queue's worker was built
with (``workflows/served.py``), and a clear error for one it was not."""

from __future__ import annotations

import uuid
from typing import cast

import pytest
from temporalio.exceptions import ApplicationError

from settings import Settings
from worker import activities
from workflows import served
from workflows.errors import ErrorCode
from workflows.sdk import (
    AgentContext,
    AgentDefinition,
    ChatReply,
    ScriptedModel,
    subagent_tool,
)

MODEL = ScriptedModel("served", lambda request: ChatReply(text="ok"))


def agent(name: str, model: ScriptedModel = MODEL) -> AgentDefinition:
    return AgentDefinition(name=name, description=name, model=model)


def queue() -> str:
    return f"tq-{uuid.uuid4()}"


def refusal(task_queue: str, name: str) -> ApplicationError:
    with pytest.raises(ApplicationError) as raised:
        served.check_served(task_queue, name)
    return raised.value


def test_each_task_queue_finds_the_agents_its_worker_serves() -> None:
    first, second = queue(), queue()
    ann, bob = agent("ann"), agent("bob")
    served.serve(first, [ann])
    served.serve(second, [bob])

    assert served.agent(first, "ann") is ann
    assert served.agent(second, "bob") is bob
    served.check_served(first, "ann")
    assert refusal(first, "bob").type == ErrorCode.UNKNOWN_AGENT


def test_serving_a_task_queue_again_replaces_its_agents() -> None:
    task_queue = queue()
    old, new = agent("ann"), agent("ann")
    served.serve(task_queue, [old, agent("bob")])
    served.serve(task_queue, [new])

    assert served.agent(task_queue, "ann") is new
    assert refusal(task_queue, "bob").type == ErrorCode.UNKNOWN_AGENT


def test_two_agents_of_one_name_are_refused() -> None:
    task_queue = queue()
    with pytest.raises(ValueError, match="Two agents are named 'ann'"):
        served.serve(task_queue, [agent("ann"), agent("ann")])
    assert refusal(task_queue, "ann").type == ErrorCode.UNKNOWN_AGENT


def test_a_run_of_an_agent_not_served_is_rejected_with_the_gateways_code() -> None:
    task_queue = queue()
    served.serve(task_queue, [agent("bob"), agent("ann")])

    error = refusal(task_queue, "carl")
    assert error.type == ErrorCode.UNKNOWN_AGENT == "UNKNOWN_AGENT"
    assert error.non_retryable
    # It names the agent, not the deployment (the task queue, what it serves).
    assert error.message == "No agent named 'carl' is served."
    assert refusal(queue(), "carl").message == error.message


async def test_a_run_nobody_sent_meets_a_stand_in_whose_turn_fails_saying_why() -> None:
    task_queue = queue()
    served.serve(task_queue, [agent("bob")])

    stand_in = served.agent(task_queue, "carl")
    assert stand_in.name == "carl"
    assert stand_in.remind_before == ()
    with pytest.raises(ApplicationError) as raised:
        await stand_in.turn(cast(AgentContext, None))
    assert raised.value.type == ErrorCode.UNKNOWN_AGENT
    assert raised.value.message == "No agent named 'carl' is served."


def test_a_worker_runs_the_activities_of_the_agents_it_serves() -> None:
    other = ScriptedModel("other", lambda request: ChatReply(text="no"))
    found = activities(Settings(), [agent("ann"), agent("bob"), agent("carl", other)])

    assert MODEL.activity in found and other.activity in found
    # One model shared by two agents is one activity.
    assert found.count(MODEL.activity) == 1


def test_a_worker_refuses_two_models_of_one_name() -> None:
    twin = ScriptedModel("served", lambda request: ChatReply(text="twin"))
    with pytest.raises(ValueError, match="two different models named 'served'"):
        activities(Settings(), [agent("ann"), agent("bob", twin)])


def test_the_agents_an_agent_hands_work_to_are_served_with_it() -> None:
    async def delegate(_: AgentContext) -> None: ...

    task_queue = queue()
    researcher, writer = agent("researcher"), agent("writer")
    lead = AgentDefinition(
        name="lead",
        description="lead",
        model=MODEL,
        tools=[subagent_tool(researcher)],
    )
    briefer = AgentDefinition(
        name="briefer", description="briefer", turn=delegate, delegates_to=[writer]
    )
    served.serve(task_queue, [lead, briefer])

    assert served.agent(task_queue, "researcher") is researcher
    assert served.agent(task_queue, "writer") is writer
