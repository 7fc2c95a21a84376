"""Guards approver policies without a server: how decisions add up (``approvers.count``),
when an edit needs a stricter policy (``approvers.no_stricter``), the policy budgets, and
who may decide what (``workflows/decisions.py``), in the decisions update and in the
owner's resume."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from ag_ui.core import Interrupt, ResumeEntry
from temporalio.exceptions import ApplicationError

from workflows import budgets
from workflows.admission import check_run
from workflows.approvers import (
    METADATA_KEY,
    OWNER_DECIDES,
    Approvers,
    ApproversView,
    Ballot,
    BoundCall,
    Escalation,
    EscalationView,
    arguments_digest,
    count,
    no_stricter,
    with_view,
)
from workflows.decisions import Decision, check_decision, permit_for
from workflows.errors import ErrorCode
from workflows.interrupts import answer_key
from workflows.models import (
    AppliedAnswer,
    DecisionRequest,
    DecisionStatus,
    RunRequest,
    ThreadState,
)
from workflows.questions import Question
from workflows.sdk import AgentDefinition, Approval, ChatReply, ScriptedModel, tool

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
OWNER = "alice"
FINANCE = Approvers(groups=["finance"], exclude_requester=True)
TWO_OF_FINANCE = Approvers(
    groups=["finance"],
    needed=2,
    exclude_requester=True,
    escalation=Escalation(after=timedelta(days=1), groups=["cfo"]),
)


def by_amount(arguments: dict[str, Any]) -> Approvers | None:
    amount = arguments["amount"]
    if amount <= 100:
        return None
    return FINANCE if amount <= 10_000 else TWO_OF_FINANCE


@tool(approval=Approval(edits=True, approvers=by_amount))
async def pay(payee: str, amount: int) -> str:
    """Pay ``amount`` to ``payee``."""
    return payee


AGENT = AgentDefinition(
    name="agent",
    description="Pays, with approvers by amount.",
    model=ScriptedModel("approvers-unit", lambda request: ChatReply(text="ok")),
    tools=[pay],
)


def key(payload: Any, status: DecisionStatus = "resolved") -> str:
    return answer_key(ResumeEntry(interrupt_id="int-1", status=status, payload=payload))


def asked(policy: Approvers = TWO_OF_FINANCE) -> ApproversView:
    return policy.view(OWNER, NOW)


APPROVED = key({"approved": True})


# --- how decisions add up -----------------------------------------------------------------


def test_approvals_of_the_same_payload_add_up_to_needed() -> None:
    first = count(asked(), None, "carol", APPROVED, approval=True)
    assert (first.verdict, first.view.received, first.view.approved_by) == (
        "pending",
        1,
        ["carol"],
    )
    second = count(first.view, APPROVED, "dave", APPROVED, approval=True)
    assert (second.verdict, second.view.received, second.view.approved_by) == (
        "settled",
        2,
        ["carol", "dave"],
    )
    assert second.superseded == []


def test_the_same_approver_counts_once() -> None:
    first = count(asked(), None, "carol", APPROVED, approval=True)
    again = count(first.view, APPROVED, "carol", APPROVED, approval=True)
    assert again.verdict == "repeated"
    assert again.view is first.view


def test_an_approval_of_another_payload_starts_the_count_again() -> None:
    first = count(asked(), None, "carol", APPROVED, approval=True)
    edited = key({"approved": True, "editedArgs": {"amount": 1}})
    other = count(first.view, APPROVED, "dave", edited, approval=True)
    assert (other.verdict, other.view.approved_by, other.superseded) == (
        "pending",
        ["dave"],
        ["carol"],
    )
    # Carol changing her mind to dave's arguments replaces her earlier approval.
    settled = count(other.view, edited, "carol", edited, approval=True)
    assert (settled.verdict, settled.view.approved_by) == ("settled", ["dave", "carol"])


def test_a_denial_or_a_cancel_settles_at_once() -> None:
    first = count(asked(), None, "carol", APPROVED, approval=True)
    vetoed = count(first.view, APPROVED, "dave", key({"approved": False}), approval=False)
    assert vetoed.verdict == "settled"
    assert vetoed.view is first.view


def test_one_approval_settles_an_owners_question() -> None:
    tally = count(asked(OWNER_DECIDES), None, OWNER, APPROVED, approval=True)
    assert tally.verdict == "settled"


# --- what an interrupt shows -------------------------------------------------------------


def test_the_view_is_the_engines_key_in_the_metadata() -> None:
    view = OWNER_DECIDES.view(OWNER, NOW)
    assert view.users == [OWNER]
    shown = with_view({"mine": 1, METADATA_KEY: "the agent's"}, view)
    assert shown == {
        "mine": 1,
        METADATA_KEY: {
            "users": [OWNER],
            "groups": [],
            "needed": 1,
            "received": 0,
            "approvedBy": [],
            "excludeRequester": False,
        },
    }
    assert ApproversView.of(shown) == view


def test_an_escalation_admits_its_targets_from_its_moment() -> None:
    view = TWO_OF_FINANCE.view(OWNER, NOW)
    assert view.escalation is not None
    assert view.escalation.at == NOW + timedelta(days=1)
    assert not view.admits("erin", ["cfo"], False, NOW + timedelta(hours=23))
    assert view.admits("erin", ["cfo"], False, NOW + timedelta(days=1))
    assert not view.admits(OWNER, ["finance"], True, NOW)


# --- when an edit needs a stricter policy ------------------------------------------------


def view(policy: Approvers) -> ApproversView:
    return policy.view(OWNER, NOW)


@pytest.mark.parametrize(
    ("edit", "asked", "allowed"),
    [
        (FINANCE, FINANCE, True),
        (TWO_OF_FINANCE, TWO_OF_FINANCE, True),
        (OWNER_DECIDES, OWNER_DECIDES, True),
        # More approvals, another group, or excluding the requester: stricter.
        (TWO_OF_FINANCE, FINANCE, False),
        (Approvers(groups=["treasury"]), FINANCE, False),
        (Approvers(users=[OWNER], exclude_requester=True, groups=["x"]), OWNER_DECIDES, False),
        # Fewer approvals of the same people, or more people: not stricter.
        (FINANCE, Approvers(groups=["finance"], needed=2, exclude_requester=True), True),
        (Approvers(groups=["finance", "cfo"]), Approvers(groups=["finance"]), True),
        # A cheaper band decided by others (the owner) is refused all the same.
        (OWNER_DECIDES, FINANCE, False),
    ],
)
def test_an_edit_may_not_need_a_stricter_policy(
    edit: Approvers, asked: Approvers, allowed: bool
) -> None:
    assert no_stricter(view(edit), view(asked), NOW) is allowed


def test_an_escalation_already_due_must_stay_decidable_by_its_targets() -> None:
    asked = view(Approvers(groups=["finance"], escalation=Escalation(after=timedelta(hours=1))))
    asked = asked.model_copy(
        update={"escalation": EscalationView(at=NOW + timedelta(hours=1), groups=["cfo"])}
    )
    edit = view(Approvers(groups=["finance"]))
    # Before it is due, the escalation does not count; once due, the edit must admit it.
    assert no_stricter(edit, asked, NOW)
    assert not no_stricter(edit, asked, NOW + timedelta(hours=2))
    later = edit.model_copy(
        update={"escalation": EscalationView(at=NOW + timedelta(hours=2), groups=["cfo"])}
    )
    assert not no_stricter(later, asked, NOW + timedelta(hours=1, minutes=30))
    assert no_stricter(later, asked, NOW + timedelta(hours=2))


# --- the policy's budgets ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("policy", "problem"),
    [
        (Approvers(users=[f"u{i}" for i in range(21)]), "21 approver users"),
        (Approvers(groups=["g" * 129]), "approver groups have 1 to 128"),
        (Approvers(users=[""]), "approver users have 1 to 128"),
        (Approvers(users=["a"], needed=21), "needs 21 approvals"),
        (
            Approvers(users=["a"], escalation=Escalation(after=timedelta(0), users=["b"])),
            "escalation after 0:00:00",
        ),
        (
            Approvers(users=["a"], escalation=Escalation(after=timedelta(days=366))),
            "escalation after 366 days",
        ),
        (Approvers(exclude_requester=True), "nobody could approve"),
    ],
)
def test_a_policy_over_its_budget_is_an_invalid_question(policy: Approvers, problem: str) -> None:
    question = Question(reason="tool_call", approvers=policy)
    with pytest.raises(ApplicationError) as raised:
        budgets.check_questions([question], 0, [], NOW)
    assert raised.value.type == ErrorCode.INVALID_QUESTION
    assert problem in raised.value.message


def test_a_policy_within_its_budget_is_asked() -> None:
    budgets.check_questions([Question(reason="tool_call", approvers=TWO_OF_FINANCE)], 0, [], NOW)


# --- who may decide what -----------------------------------------------------------------

CALL = BoundCall(name="pay", arguments={"payee": "bob", "amount": 500})
SCHEMA = {
    "type": "object",
    "properties": {"approved": {"type": "boolean"}, "editedArgs": {"type": "object"}},
    "required": ["approved"],
}


def waiting(policy: Approvers = FINANCE) -> ThreadState:
    """Alice's thread, waiting on her approval of ``CALL`` under ``policy``."""
    shown = policy.view(OWNER, NOW)
    thread = ThreadState(thread_id="t", agent="agent", owner=OWNER)
    thread.asked.append(
        Interrupt(
            id="int-1",
            reason="tool_call",
            tool_call_id="tc-1",
            response_schema=SCHEMA,
            metadata=with_view(None, shown),
        )
    )
    thread.ballots["int-1"] = Ballot(asked_at=NOW, call=CALL)
    return thread


def decision(
    principal: str, groups: list[str], status: DecisionStatus = "resolved", payload: Any = None
) -> DecisionRequest:
    if status == "resolved" and payload is None:
        payload = {"approved": True}
    return DecisionRequest(
        interrupt_id="int-1", principal=principal, groups=groups, status=status, payload=payload
    )


def rejected(thread: ThreadState, request: DecisionRequest, at: datetime = NOW) -> str:
    with pytest.raises(ApplicationError) as raised:
        check_decision(thread, request, AGENT, at)
    code = raised.value.type
    assert code is not None
    return code


def test_an_approver_may_decide() -> None:
    checked = check_decision(waiting(), decision("carol", ["finance"]), AGENT, NOW)
    assert isinstance(checked, Decision) and checked.approval


@pytest.mark.parametrize(
    ("principal", "groups"),
    [("bob", []), ("bob", ["cfo"]), (OWNER, ["finance"])],
    ids=["nobody", "another-group", "the-requester"],
)
def test_others_may_not(principal: str, groups: list[str]) -> None:
    assert rejected(waiting(), decision(principal, groups)) == ErrorCode.NOT_AN_APPROVER


def test_the_owner_may_always_cancel() -> None:
    checked = check_decision(waiting(), decision(OWNER, [], "cancelled"), AGENT, NOW)
    assert isinstance(checked, Decision) and not checked.approval
    # Nobody else outside the policy may.
    assert rejected(waiting(), decision("bob", [], "cancelled")) == ErrorCode.NOT_AN_APPROVER


def test_a_decision_is_checked_like_a_resume_entry() -> None:
    missing = DecisionRequest(
        interrupt_id="int-1", principal="carol", groups=["finance"], status="resolved"
    )
    assert rejected(waiting(), missing) == ErrorCode.MISSING_PAYLOAD
    invalid = decision("carol", ["finance"], payload={"approved": "yes"})
    assert rejected(waiting(), invalid) == ErrorCode.INVALID_PAYLOAD
    large = decision("carol", ["finance"], payload={"approved": True, "x": "x" * 200_000})
    assert rejected(waiting(), large) == ErrorCode.INPUT_TOO_LARGE


@pytest.mark.parametrize(
    ("amount", "allowed"), [(300, True), (20_000, False), (50, False)], ids=str
)
def test_an_edit_is_held_to_the_interrupts_policy(amount: int, allowed: bool) -> None:
    payload = {"approved": True, "editedArgs": {"payee": "bob", "amount": amount}}
    request = decision("carol", ["finance"], payload=payload)
    if allowed:
        check_decision(waiting(), request, AGENT, NOW)
    else:
        assert rejected(waiting(), request) == ErrorCode.POLICY_EXCEEDED
    # A denial runs nothing, whatever its edits.
    denial = decision("carol", ["finance"], payload={**payload, "approved": False})
    check_decision(waiting(), denial, AGENT, NOW)


def test_a_decision_on_a_closed_interrupt() -> None:
    thread = ThreadState(thread_id="t", agent="agent", owner=OWNER)
    request = decision("carol", ["finance"])
    assert rejected(thread, request) == ErrorCode.UNKNOWN_INTERRUPT
    done = AppliedAnswer(
        interrupt_id="int-1",
        status="resolved",
        key=APPROVED,
        run_key="decision-1",
        decided_by=["carol"],
    )
    thread.applied["int-1"] = done
    # The same decision by one who settled it is a repeat; anything else is too late.
    assert check_decision(thread, request, AGENT, NOW) == done
    assert rejected(thread, decision("dave", ["finance"])) == ErrorCode.INTERRUPT_ALREADY_ANSWERED
    thread.applied["int-1"] = done.model_copy(update={"status": "expired", "key": "expired:1"})
    assert rejected(thread, request) == ErrorCode.INTERRUPT_EXPIRED


def test_a_permit_binds_the_approved_arguments() -> None:
    thread = waiting()
    interrupt, ballot = thread.asked[0], thread.ballots["int-1"]
    edited = {"payee": "bob", "amount": 300}
    approval = ResumeEntry(
        interrupt_id="int-1", status="resolved", payload={"approved": True, "editedArgs": edited}
    )
    permit = permit_for(interrupt, ballot, approval, ["carol"], NOW)
    assert permit is not None
    assert (permit.tool_call_id, permit.digest, permit.approvers) == (
        "tc-1",
        arguments_digest(edited),
        ["carol"],
    )
    plain = ResumeEntry(interrupt_id="int-1", status="resolved", payload={"approved": True})
    assert permit_for(interrupt, ballot, plain, ["carol"], NOW).digest == arguments_digest(  # type: ignore[union-attr]
        CALL.arguments
    )
    denial = ResumeEntry(interrupt_id="int-1", status="resolved", payload={"approved": False})
    cancel = ResumeEntry(interrupt_id="int-1", status="cancelled", payload={"approved": True})
    assert permit_for(interrupt, ballot, denial, ["carol"], NOW) is None
    assert permit_for(interrupt, ballot, cancel, [OWNER], NOW) is None


# --- the owner's resume ------------------------------------------------------------------


def owners_resume(thread: ThreadState, *entries: dict[str, Any]) -> RunRequest:
    body = {"threadId": "t", "runId": "r2", "messages": [], "resume": list(entries)}
    return RunRequest.model_validate({"agent": "agent", "input": body, "principal": OWNER})


def approve(payload: Any = None) -> dict[str, Any]:
    return {
        "interruptId": "int-1",
        "status": "resolved",
        "payload": payload or {"approved": True},
    }


def test_the_owner_resolves_only_what_they_alone_may_settle() -> None:
    thread = waiting(OWNER_DECIDES)
    check_run(thread, owners_resume(thread, approve()), AGENT, NOW)
    for policy in (FINANCE, Approvers(users=[OWNER, "bob"], needed=2)):
        thread = waiting(policy)
        with pytest.raises(ApplicationError) as raised:
            check_run(thread, owners_resume(thread, approve()), AGENT, NOW)
        assert raised.value.type == ErrorCode.NOT_AN_APPROVER
        assert "/threads/t/interrupts/int-1/decisions" in raised.value.message
        cancel = {"interruptId": "int-1", "status": "cancelled"}
        check_run(thread, owners_resume(thread, cancel), AGENT, NOW)


def test_the_owners_edit_is_held_to_the_policy() -> None:
    thread = waiting(OWNER_DECIDES)
    over = {"approved": True, "editedArgs": {"payee": "bob", "amount": 500}}
    with pytest.raises(ApplicationError) as raised:
        check_run(thread, owners_resume(thread, approve(over)), AGENT, NOW)
    assert raised.value.type == ErrorCode.POLICY_EXCEEDED
    within = {"approved": True, "editedArgs": {"payee": "bob", "amount": 80}}
    check_run(thread, owners_resume(thread, approve(within)), AGENT, NOW)


def test_an_interrupt_from_before_policies_is_the_owners() -> None:
    thread = ThreadState(thread_id="t", agent="agent", owner=OWNER)
    thread.asked.append(Interrupt(id="int-1", reason="confirmation"))
    check_run(thread, owners_resume(thread, approve(True)), AGENT, NOW)
    assert rejected(thread, decision("carol", ["finance"], payload=True)) == (
        ErrorCode.NOT_AN_APPROVER
    )
