"""Who may decide an open interrupt, checked without side effects.

Pure functions of the thread's state: the ``decide`` update's validator rejects a
decision with them before anything is written, and its handler checks again under the
run lock with the same code. The owner's resume is held to the same policies
(:func:`owner_decides`, which ``check_resume`` calls for each entry); an operator's is
not (break-glass). How decisions add up is ``workflows/approvers.py``'s rule.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from ag_ui.core import Interrupt, ResumeEntry

    from workflows import budgets
    from workflows.approvers import (
        OWNER_DECIDES,
        ApproversView,
        Ballot,
        arguments_digest,
        no_stricter,
    )
    from workflows.errors import ErrorCode, rejection
    from workflows.interrupts import EntryCheck, answer_key, check_answer, same_answer
    from workflows.models import AppliedAnswer, DecisionRequest, Permit, ThreadState

if TYPE_CHECKING:
    from workflows.sdk.agent import AgentDefinition

DECISIONS_PATH = "POST /threads/{thread}/interrupts/{interrupt}/decisions"
"""Where an interrupt's approvers decide it, for the messages that send them there."""


@dataclass(frozen=True)
class Decision:
    """A decision the thread may count (see :func:`check_decision`)."""

    interrupt: Interrupt
    view: ApproversView
    """Who may decide it, and the approvals so far."""
    ballot: Ballot
    entry: ResumeEntry
    """The decision as a resume entry: what settles the interrupt, once it does."""
    key: str
    """Its canonical digest (``interrupts.answer_key``), what approvals are counted by."""

    @property
    def approval(self) -> bool:
        """A ``resolved`` that is not a denial: it counts toward ``needed``."""
        return self.entry.status == "resolved" and approved(self.entry.payload) is not False


def check_decision(
    thread: ThreadState, request: DecisionRequest, agent: AgentDefinition, now: datetime
) -> Decision | AppliedAnswer:
    """Raise the rejection (``ApplicationError`` with a stable code) of a decision the
    thread must not count; change nothing.

    Returns:
        The decision, to count; or, when it repeats a decision that settled the
        interrupt already, the ledger's record of that answer.
    """
    budgets.check_decision_size(request)
    entry = request.entry
    interrupt = next((i for i in thread.open_interrupts if i.id == request.interrupt_id), None)
    if interrupt is None:
        return _settled(thread.applied, request.principal, entry)
    view = view_of(thread, interrupt, now)
    ballot = ballot_of(thread, interrupt, now)
    is_owner = request.principal == thread.owner
    admitted = view.admits(request.principal, request.groups, is_owner, now)
    # The owner may always withdraw their own request.
    if not (admitted or (is_owner and entry.status == "cancelled")):
        raise rejection(
            ErrorCode.NOT_AN_APPROVER,
            f"{request.principal!r} is not among the approvers of interrupt {interrupt.id}"
            f"{' (its requester is excluded)' if is_owner else ''}.",
        )
    check_answer("The decision", entry, interrupt, now)
    check_edit("The decision", entry, interrupt, view, ballot, thread.owner, agent, now)
    return Decision(interrupt, view, ballot, entry, answer_key(entry))


def _settled(
    applied: dict[str, AppliedAnswer], principal: str, entry: ResumeEntry
) -> AppliedAnswer:
    """A decision on an interrupt that is not open: a repeat by one of those who settled
    it passes (the ledger's record); anything else is rejected as a resume's would be."""
    done = applied.get(entry.interrupt_id)
    if done is None:
        raise rejection(
            ErrorCode.UNKNOWN_INTERRUPT,
            f"{entry.interrupt_id!r} is not an interrupt of this thread.",
        )
    if same_answer(done, entry) and principal in done.decided_by:
        return done
    if done.status == "expired":
        raise rejection(
            ErrorCode.INTERRUPT_EXPIRED,
            f"Interrupt {entry.interrupt_id} expired at {done.expires_at}; it can no longer "
            "be decided.",
        )
    raise rejection(
        ErrorCode.INTERRUPT_ALREADY_ANSWERED,
        f"Interrupt {entry.interrupt_id} was already settled ({done.status}).",
    )


def owner_decides(thread: ThreadState, agent: AgentDefinition, now: datetime) -> EntryCheck:
    """The check of the owner's resume entries (``check_resume``'s ``decider``).

    The owner's ``resolved`` stands only where their one decision settles the
    interrupt: they are admitted (by name: a run carries no groups) and one approval
    is enough; approvers decide the rest through the decisions endpoint. ``cancelled``
    is always theirs to send. An approval's edit is held to the interrupt's policy.
    """

    def check(where: str, entry: ResumeEntry, interrupt: Interrupt) -> None:
        if entry.status == "cancelled":
            return
        view = view_of(thread, interrupt, now)
        if view.needed > 1 or not view.admits(thread.owner, (), True, now):
            path = DECISIONS_PATH.format(thread=thread.thread_id, interrupt=interrupt.id)
            raise rejection(
                ErrorCode.NOT_AN_APPROVER,
                f"{where}: interrupt {interrupt.id} needs {_who(view)}, which this resume "
                f"cannot give; its approvers decide it with {path} (a resume may cancel it).",
            )
        ballot = ballot_of(thread, interrupt, now)
        check_edit(where, entry, interrupt, view, ballot, thread.owner, agent, now)

    return check


def _who(view: ApproversView) -> str:
    named = [*view.users, *(f"group {group}" for group in view.groups)]
    return f"{view.needed} approval(s) of {', '.join(named)}"


def check_edit(
    where: str,
    entry: ResumeEntry,
    interrupt: Interrupt,
    view: ApproversView,
    ballot: Ballot,
    owner: str,
    agent: AgentDefinition,
    now: datetime,
) -> None:
    """Refuse (``POLICY_EXCEEDED``) an approval whose ``editedArgs`` need a stricter
    policy than the interrupt's (``approvers.no_stricter``): resolved as the agent's
    ``approvers_for`` says for those arguments, as of the interrupt's asking."""
    call = ballot.call
    edited = edited_args(entry.payload)
    if call is None or edited is None or entry.status != "resolved":
        return
    if approved(entry.payload) is False:
        return  # A denial runs nothing, whatever it says.
    try:
        policy = agent.approvers_for(call, edited) or OWNER_DECIDES
    except Exception as error:
        # Agent code: whatever it raises, the edit cannot be shown to be allowed.
        workflow.logger.warning("approvers_for failed on edited arguments", exc_info=error)
        policy = None
    if policy is None or not no_stricter(policy.view(owner, ballot.asked_at), view, now):
        raise rejection(
            ErrorCode.POLICY_EXCEEDED,
            f"{where}: the editedArgs of interrupt {interrupt.id} would need approvers "
            "beyond those it asks; nothing was counted. Approve arguments within its "
            "policy, or deny it and ask anew.",
        )


def view_of(thread: ThreadState, interrupt: Interrupt, now: datetime) -> ApproversView:
    """Who may decide the open ``interrupt`` (its ``metadata.approvers``). One asked
    before approver policies (carried from older code) shows none: its owner decides
    it, as they did then."""
    return ApproversView.of(interrupt.metadata) or OWNER_DECIDES.view(thread.owner, now)


def ballot_of(thread: ThreadState, interrupt: Interrupt, now: datetime) -> Ballot:
    """The thread's ballot of the open ``interrupt`` (an empty one for an interrupt
    asked before approver policies)."""
    return thread.ballots.get(interrupt.id) or Ballot(asked_at=now)


def approved(payload: Any) -> bool | None:
    """The payload's ``approved``, if it is a boolean there."""
    value = payload.get("approved") if isinstance(payload, dict) else None
    return value if isinstance(value, bool) else None


def edited_args(payload: Any) -> dict[str, Any] | None:
    """The payload's ``editedArgs``, if it is an object there."""
    edited = payload.get("editedArgs") if isinstance(payload, dict) else None
    return edited if isinstance(edited, dict) else None


def approved_digest(ballot: Ballot, payload: Any) -> str | None:
    """The digest of the arguments an approval of ``ballot``'s tool call is for: the
    ``editedArgs``, or the call's own; ``None`` when it is about no call."""
    if ballot.call is None:
        return None
    return arguments_digest(edited_args(payload) or ballot.call.arguments)


def permit_for(
    interrupt: Interrupt,
    ballot: Ballot,
    entry: ResumeEntry,
    decided_by: list[str],
    now: datetime,
) -> Permit | None:
    """The permit of a settling answer: for an approved tool call (``resolved``,
    ``approved`` true), its arguments by digest and who approved them; otherwise none."""
    digest = approved_digest(ballot, entry.payload)
    if (
        digest is None
        or interrupt.tool_call_id is None
        or entry.status != "resolved"
        or approved(entry.payload) is not True
    ):
        return None
    return Permit(
        interrupt_id=interrupt.id,
        tool_call_id=interrupt.tool_call_id,
        digest=digest,
        approvers=decided_by,
        at=now,
    )
