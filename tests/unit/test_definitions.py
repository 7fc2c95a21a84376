"""What an agent definition promises before anything runs: tools that cannot be confused,
answers parsed strictly, and what operators see of a thread."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from ag_ui.core import Interrupt, ResumeEntry
from pydantic import TypeAdapter, ValidationError
from temporalio.exceptions import ApplicationError

from workflows import search_attributes, visibility
from workflows.errors import ErrorCode
from workflows.interrupts import check_resume
from workflows.sdk import AgentDefinition, ChatReply, ScriptedModel, tool
from workflows.sdk.tools import decision_model

NOW = datetime(2026, 11, 23, tzinfo=UTC)


@tool
async def refund(order_id: str, amount: float) -> str:
    """Refund."""
    return f"{order_id}: {amount}"


MODEL = ScriptedModel("definitions", lambda request: ChatReply(text="ok"))


def test_two_tools_of_one_name_refuse_the_definition() -> None:
    with pytest.raises(ValueError, match="several tools named \\['refund'\\]"):
        AgentDefinition("a", "", MODEL, tools=[refund, refund])


def approval(edits: bool) -> Interrupt:
    schema = TypeAdapter(decision_model(refund.spec, edits)).json_schema()
    return Interrupt(id="int-1", reason="tool_call", response_schema=schema)


def rejected(interrupt: Interrupt, payload: object) -> str | None:
    entry = ResumeEntry(interrupt_id=interrupt.id, status="resolved", payload=payload)
    try:
        check_resume([interrupt], [entry], {}, NOW)
    except ApplicationError as error:
        return error.type
    return None


def test_an_approvals_schema_accepts_a_decision_and_edits_of_the_tools_shape() -> None:
    assert rejected(approval(edits=True), {"approved": True}) is None
    edited = {"approved": True, "editedArgs": {"order_id": "B42", "amount": 450}}
    assert rejected(approval(edits=True), edited) is None
    parsed = decision_model(refund.spec, True).model_validate(edited)
    assert parsed.approved and parsed.edits == {"order_id": "B42", "amount": 450}


@pytest.mark.parametrize(
    ("edits", "payload"),
    [
        (True, {"approved": True, "editArgs": {"order_id": "B42", "amount": 450}}),
        (True, {"approved": True, "editedArgs": {"order_id": "B42"}}),
        (True, {"approved": True, "editedArgs": {"order_id": "B42", "amount": 1, "x": 2}}),
        (False, {"approved": True, "editedArgs": {"order_id": "B42", "amount": 450}}),
        (False, {"approved": "yes"}),
    ],
    ids=["misspelt-field", "edits-incomplete", "edits-extra", "edits-not-offered", "not-bool"],
)
def test_an_answer_the_approval_does_not_name_is_an_invalid_payload(
    edits: bool, payload: dict[str, object]
) -> None:
    assert rejected(approval(edits), payload) == ErrorCode.INVALID_PAYLOAD


@pytest.mark.parametrize(
    ("edits", "payload"),
    [
        (True, {"approved": True, "editArgs": {}}),
        (False, {"approved": True, "editedArgs": {}}),
        (False, {"approved": "yes"}),
    ],
    ids=["misspelt-field", "edits-not-offered", "not-bool"],
)
def test_the_decision_parses_as_strictly_as_its_schema(
    edits: bool, payload: dict[str, object]
) -> None:
    with pytest.raises(ValidationError):
        decision_model(refund.spec, edits).model_validate(payload)


def interrupt(id: str, reason: str, expires_at: str | None = None) -> Interrupt:
    return Interrupt(id=id, reason=reason, expires_at=expires_at)


def test_a_waiting_threads_attributes_name_its_interrupts_and_earliest_deadline() -> None:
    waiting = [
        interrupt("int-2", "tool_call", "2026-11-25T00:00:00Z"),
        interrupt("int-1", "confirmation", "2026-11-24T00:00:00Z"),
        interrupt("int-3", "tool_call"),
    ]
    pairs = {
        p.key.name: p.value for p in visibility.attributes("demo", "alice", "waiting", NOW, waiting)
    }
    assert pairs == {
        "AguiAgent": "demo",
        "AguiOwner": "alice",
        "AguiThreadStatus": "waiting",
        "AguiLastActivity": NOW,
        "AguiInterruptIds": ["int-2", "int-1", "int-3"],
        "AguiInterruptReasons": ["confirmation", "tool_call"],
        "AguiNextExpiry": datetime(2026, 11, 24, tzinfo=UTC),
        "AguiApprovers": [],
    }
    memo = visibility.memo(waiting, "alice")
    assert memo[visibility.OWNER_MEMO] == "alice"
    assert memo[visibility.INTERRUPTS_MEMO][1] == {
        "id": "int-1",
        "reason": "confirmation",
        "expiresAt": "2026-11-24T00:00:00Z",
    }


def test_a_running_thread_publishes_only_its_status_and_a_settled_one_unsets_its_deadline() -> None:
    running = visibility.attributes("demo", "alice", "running", NOW, None)
    assert {p.key.name for p in running} == {
        "AguiAgent",
        "AguiOwner",
        "AguiThreadStatus",
        "AguiLastActivity",
    }
    assert len(visibility.updates(running, settled=False)) == 4
    idle = visibility.updates(visibility.attributes("demo", "alice", "idle", NOW, []), settled=True)
    assert search_attributes.NEXT_EXPIRY.value_unset() in idle


def test_a_run_handing_the_thread_on_leaves_nothing_to_find_it_by_but_agent_and_time() -> None:
    cleared = {update.key.name for update in visibility.cleared()}
    assert cleared == {
        "AguiThreadStatus",
        "AguiInterruptIds",
        "AguiInterruptReasons",
        "AguiNextExpiry",
        "AguiApprovers",
    }
    assert all(update.value is None for update in visibility.cleared())


def test_an_owner_is_filterable_as_it_is_when_plain_and_by_digest_otherwise() -> None:
    assert visibility.owner_key("auth0|5f1c-ab.cd@example.com") == "auth0|5f1c-ab.cd@example.com"
    key = visibility.owner_key('eve" OR AguiOwner != "x')
    assert key.startswith("sha256:") and '"' not in key
