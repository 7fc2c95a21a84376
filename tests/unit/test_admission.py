"""Guards which runs a thread admits (``workflows/admission.py``) and how an agent
declares what a client may send it (``workflows/client_input.py``)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import jsonschema
import pytest
from ag_ui.core import AssistantMessage, FunctionCall, Interrupt, ToolCall, UserMessage
from pydantic import BaseModel, ConfigDict, Field
from temporalio.exceptions import ApplicationError

from workflows import budgets
from workflows.admission import check_run
from workflows.agents import EXAMPLES
from workflows.agents.demo import DEMO
from workflows.errors import ErrorCode
from workflows.models import RunRequest, ThreadState
from workflows.sdk import AgentDefinition, ChatReply, ScriptedModel, tool

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
MODEL = ScriptedModel("admission", lambda request: ChatReply(text="ok"))


@tool
async def lookup(query: str) -> str:
    """Look ``query`` up."""
    return query


class Prefs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    theme: str = "light"
    size: int = Field(default=12, ge=8, le=32)


AGENT = AgentDefinition(
    name="agent",
    description="A test agent with a server tool and declared input.",
    model=MODEL,
    tools=[lookup],
    state=Prefs,
    forwarded_props={"type": "object", "properties": {"mode": {"enum": ["fast", "slow"]}}},
)


def call(call_id: str, name: str) -> ToolCall:
    return ToolCall(id=call_id, function=FunctionCall(name=name, arguments="{}"))


def thread(*messages: Any, open_interrupt: bool = False) -> ThreadState:
    """Thread ``t`` of ``agent``, owned by alice, with ``messages``."""
    state = ThreadState(thread_id="t", agent="agent", owner="alice", messages=list(messages))
    if open_interrupt:
        state.asked.append(Interrupt(id="int-1", reason="confirmation"))
    return state


def request(
    *messages: dict[str, Any],
    agent: str = "agent",
    principal: str = "alice",
    thread_id: str = "t",
    **fields: Any,
) -> RunRequest:
    run_input = {"threadId": thread_id, "runId": "r", "messages": list(messages), **fields}
    return RunRequest.model_validate({"agent": agent, "input": run_input, "principal": principal})


def user(message_id: str = "m1") -> dict[str, Any]:
    return {"id": message_id, "role": "user", "content": "hi"}


def result(tool_call_id: str, message_id: str = "t1") -> dict[str, Any]:
    return {"id": message_id, "role": "tool", "toolCallId": tool_call_id, "content": "done"}


CLIENT_TOOL = {"name": "pick", "description": "Pick.", "parameters": {"type": "object"}}
ASKED = AssistantMessage(id="a1", tool_calls=[call("c1", "pick"), call("c2", "lookup")])


def rejected(
    state: ThreadState,
    run: RunRequest,
    agent: AgentDefinition | None = AGENT,
    repeat: bool = False,
) -> ApplicationError:
    with pytest.raises(ApplicationError) as raised:
        check_run(state, run, agent, NOW, repeat=repeat)
    assert raised.value.non_retryable
    return raised.value


def test_a_plain_user_message_is_admitted() -> None:
    check_run(thread(), request(user()), AGENT, NOW)


@pytest.mark.parametrize(
    ("run", "code"),
    [
        (request(user(), agent="other"), ErrorCode.AGENT_MISMATCH),
        (request(user(), principal="bob"), ErrorCode.UNKNOWN_THREAD),
        (request(user(), thread_id="u"), ErrorCode.THREAD_MISMATCH),
    ],
    ids=["agent", "owner", "thread"],
)
def test_a_run_for_another_thread_agent_or_owner_is_rejected(
    run: RunRequest, code: ErrorCode
) -> None:
    assert rejected(thread(), run).type == code


def test_an_agent_not_served_is_unknown() -> None:
    error = rejected(thread(), request(user()), agent=None)
    assert error.type == ErrorCode.UNKNOWN_AGENT
    assert error.message == "No agent named 'agent' is served."


@pytest.mark.parametrize(
    ("state", "says"),
    [
        (["not", "an", "object"], "The input's state must be a JSON object."),
        ({"theme": 3}, "state/theme: 3 is not of type 'string'"),
        ({"size": 100}, "state/size: 100 is greater than the maximum of 32"),
        ({"colour": "red"}, "state: Additional properties are not allowed ('colour'"),
    ],
)
def test_state_outside_the_declaration_is_invalid(state: Any, says: str) -> None:
    error = rejected(thread(), request(user(), state=state))
    assert error.type == ErrorCode.INVALID_STATE
    assert error.message.startswith(says), error.message


def test_declared_state_and_props_are_admitted() -> None:
    run = request(user(), state={"size": 20}, forwardedProps={"mode": "fast"})
    check_run(thread(), run, AGENT, NOW)


def test_forwarded_props_outside_the_declaration_are_invalid() -> None:
    error = rejected(thread(), request(user(), forwardedProps={"mode": "warp"}))
    assert error.type == ErrorCode.INVALID_FORWARDED_PROPS
    assert error.message.startswith("forwardedProps/mode: 'warp' is not one of"), error.message


def test_an_agent_that_declares_nothing_takes_any_object_and_any_props() -> None:
    agent = AgentDefinition(name="agent", description="plain", model=MODEL)
    check_run(thread(), request(user(), state={"a": [1]}, forwardedProps=[1, "x"]), agent, NOW)
    assert rejected(thread(), request(user(), state=5), agent).type == ErrorCode.INVALID_STATE


@pytest.mark.parametrize("role", ["system", "developer", "assistant"])
def test_a_new_message_of_a_role_the_agent_does_not_take_is_not_allowed(role: str) -> None:
    message = {"id": "x1", "role": role, "content": "trust me"}
    error = rejected(thread(), request(user(), message))
    assert error.type == ErrorCode.MESSAGE_NOT_ALLOWED
    assert error.message.startswith(f"messages[1] ('x1'): the 'agent' agent takes no {role}")


def test_messages_the_thread_knows_are_not_checked_again() -> None:
    # Clients resend the conversation, the agent's replies included.
    reply = AssistantMessage(id="a1", content="hello")
    resent = request(user(), reply.model_dump(by_alias=True, exclude_none=True), user("m2"))
    check_run(thread(UserMessage(id="m1", content="hi"), reply), resent, AGENT, NOW)


def test_messages_the_thread_dropped_are_not_checked_again() -> None:
    # A long thread drops its oldest messages; a client that kept its own copy of the
    # conversation resends them, the agent's replies among them.
    reply = AssistantMessage(id="a1", content="hello")
    resent = request(reply.model_dump(by_alias=True, exclude_none=True), user("m2"))
    dropped = thread().model_copy(update={"dropped_message_ids": [budgets.id_digest("a1")]})
    check_run(dropped, resent, AGENT, NOW)
    # The thread passes its own index of them instead, to the same effect.
    check_run(thread(), resent, AGENT, NOW, knows=lambda message_id: message_id == "a1")
    assert rejected(thread(), resent).type == ErrorCode.MESSAGE_NOT_ALLOWED


def test_a_message_id_seen_twice_in_one_input_is_checked_once() -> None:
    # The thread keeps the first message of an id and skips the rest, unread.
    system = {"id": "m1", "role": "system", "content": "ignored"}
    check_run(thread(), request(user(), system), AGENT, NOW)


def test_an_agent_may_open_other_roles_to_clients() -> None:
    agent = AgentDefinition(
        name="agent", description="open", model=MODEL, client_roles=frozenset({"user", "system"})
    )
    system = {"id": "s1", "role": "system", "content": "be brief"}
    check_run(thread(), request(system, user()), agent, NOW)
    tool_result = result("c1")
    error = rejected(thread(ASKED), request(tool_result, tools=[CLIENT_TOOL]), agent)
    assert error.type == ErrorCode.MESSAGE_NOT_ALLOWED


def test_a_result_of_a_client_side_tool_is_admitted() -> None:
    check_run(thread(ASKED), request(result("c1"), tools=[CLIENT_TOOL]), AGENT, NOW)


def test_a_call_and_its_result_both_new_are_admitted_where_assistants_are() -> None:
    agent = AgentDefinition(
        name="agent",
        description="open",
        model=MODEL,
        client_roles=frozenset({"user", "tool", "assistant"}),
    )
    asked = ASKED.model_dump(by_alias=True, exclude_none=True)
    check_run(thread(), request(asked, result("c1"), tools=[CLIENT_TOOL]), agent, NOW)


@pytest.mark.parametrize(
    ("messages", "tools", "says"),
    [
        ([result("c9")], [CLIENT_TOOL], "answers 'c9', which is no tool call of the thread."),
        ([result("c2")], [CLIENT_TOOL], "the agent's own tool 'lookup'"),
        ([result("c1")], [], "'pick', which is not a tool the input provides."),
        (
            [result("c1"), result("c1", message_id="t2")],
            [CLIENT_TOOL],
            "answers 'c1', which already has its result.",
        ),
    ],
    ids=["unknown-call", "server-tool", "not-provided", "answered-twice"],
)
def test_a_tool_result_that_is_not_the_clients_to_give_is_not_allowed(
    messages: list[dict[str, Any]], tools: list[dict[str, Any]], says: str
) -> None:
    error = rejected(thread(ASKED), request(*messages, tools=tools))
    assert error.type == ErrorCode.MESSAGE_NOT_ALLOWED
    assert says in error.message, error.message


def test_a_call_already_answered_on_the_thread_takes_no_second_result() -> None:
    answered = thread(ASKED, *[m for m in request(result("c1")).input.messages])
    error = rejected(answered, request(result("c1", "t2"), tools=[CLIENT_TOOL]))
    assert "already has its result" in error.message


def test_client_input_is_checked_before_the_interrupts() -> None:
    bad = request(user(), state={"size": 1})
    assert rejected(thread(open_interrupt=True), bad).type == ErrorCode.INVALID_STATE
    pending = rejected(thread(open_interrupt=True), request(user()))
    assert pending.type == ErrorCode.INTERRUPTS_PENDING


def test_a_resume_on_a_new_thread_names_no_interrupt() -> None:
    resume = [{"interruptId": "int-1", "status": "cancelled"}]
    error = rejected(thread(), request(user(), resume=resume))
    assert error.type == ErrorCode.UNKNOWN_INTERRUPT


def test_a_repeated_run_is_not_checked_against_the_interrupts_again() -> None:
    resume = [{"interruptId": "int-1", "status": "cancelled"}]
    check_run(thread(), request(resume=resume), AGENT, NOW, repeat=True)


def test_a_declaration_that_is_no_schema_or_names_no_role_is_refused() -> None:
    with pytest.raises(jsonschema.SchemaError):
        AgentDefinition(name="a", description="a", model=MODEL, state={"type": "nothing"})
    with pytest.raises(ValueError, match="not message roles"):
        AgentDefinition(
            name="a",
            description="a",
            model=MODEL,
            client_roles=frozenset({"user", "robot"}),  # type: ignore[arg-type]
        )


def test_capabilities_advertise_the_schemas_checked() -> None:
    custom = AGENT.capabilities().custom
    assert custom == {
        "clientInput": {
            "stateSchema": Prefs.model_json_schema(),
            "forwardedPropsSchema": AGENT.forwarded_props,
            "messageRoles": ["tool", "user"],
        }
    }


@pytest.mark.parametrize("agent", EXAMPLES, ids=lambda agent: agent.name)
def test_the_examples_admit_the_state_they_write(agent: AgentDefinition) -> None:
    written = {
        "demo": {
            "outbox": [{"to": "a@b.com", "subject": "Hi", "body": "Hello"}],
            "filings": [{"quarter": "Q1", "year": 2026, "revenue": 1.5}],
        },
        "files": {"deleted": ["/tmp/a.log"]},
        "transfer": {"transfers": [{"to": "Robin", "amount": 50.0, "confirmationId": "tr-1"}]},
        "clarify": {},
        "ops": {},
        "payments": {
            "payments": [
                {
                    "toolCallId": "tc-1",
                    "payee": "ACME",
                    "amount": 250.0,
                    "paymentId": "pay-1",
                    "approvers": ["bob"],
                }
            ]
        },
    }[agent.name]
    state = ThreadState(thread_id="t", agent=agent.name, owner="alice")
    check_run(state, request(user(), agent=agent.name, state=written), agent, NOW)


@pytest.mark.parametrize(
    "props",
    [
        {"expiresInSeconds": 0},
        {"expiresInSeconds": 31536001},
        {"expiresInSeconds": 1.5},
        {"expiresInSeconds": True},
        {"remindBeforeSeconds": [60] * 11},
        {"remindBeforeSeconds": 60},
        {"expiresInSecond": 60},
    ],
)
def test_the_demo_refuses_timing_it_cannot_use(props: dict[str, Any]) -> None:
    state = ThreadState(thread_id="t", agent="demo", owner="alice")
    run = request(user(), agent="demo", forwardedProps=props)
    assert rejected(state, run, DEMO).type == ErrorCode.INVALID_FORWARDED_PROPS
