"""Who may answer an interrupt: approver policies, as agents declare them and as clients
see them, and the permit an approved tool call runs under.

An agent says who may answer where it asks (:class:`Approvers` on an ``Ask``); without
one, the thread's owner answers, as a chat always has. When the thread opens the
interrupt it resolves the policy against the thread (its owner, the moment of asking)
into :class:`ApproversView`, which every client sees as ``Interrupt.metadata.approvers``
and which the gateway checks a decider against (:meth:`ApproversView.admits`). Pure
models and functions: the workflow, the SDK, activities and the gateway all import it.

How decisions settle an interrupt (n-of-m, :func:`count`), wherever they come from (the
decisions endpoint, the owner's resume):

- A ``cancelled`` from an admitted approver, or from the thread's owner (who may always
  withdraw their request), settles it as ``cancelled``.
- A ``resolved`` whose payload says ``"approved": false`` (a denial) settles it at once,
  with that payload: one approver's veto is enough.
- Any other ``resolved`` is an approval of exactly its payload (canonical JSON: an
  ``editedArgs`` is part of it). Approvals count per identical payload: an approval of
  a payload other than the one being counted (other ``editedArgs``) starts the count
  again on the new payload, and the earlier approvals no longer count, so no arguments
  ever run that fewer than ``needed`` people approved. A principal counts once: the
  same decision again is a repeat and changes nothing.
- When ``needed`` distinct principals approved the same payload, it settles as
  ``resolved`` with that payload, decided by them.

An approval's ``editedArgs`` must not need a stricter policy than the interrupt asks
under (:func:`no_stricter`); the thread refuses it (``POLICY_EXCEEDED``) before
counting anything.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from pydantic import Field

from workflows.wire import Model

METADATA_KEY = "approvers"
"""The key of :class:`ApproversView` in ``Interrupt.metadata``."""


class Escalation(Model):
    """After ``after`` without a settled answer, ``users`` and ``groups`` may decide too,
    and an ``interrupt.escalated`` notice goes to the reminder webhook."""

    after: timedelta
    users: list[str] = Field(default_factory=list)
    groups: list[str] = Field(default_factory=list)


class Approvers(Model):
    """Who may answer a question, as an agent declares it (``Ask.approvers``).

    Args:
        users: Principals (token subjects) who may decide.
        groups: Groups (the token's groups claim) whose members may decide.
        needed: Distinct eligible principals who must approve the same answer (n-of-m).
        exclude_requester: The thread's owner may not decide, even as a member of a
            group (separation of duties); they may still withdraw (``cancelled``) it.
        escalation: Who else may decide after a delay.

    With neither ``users`` nor ``groups``, the thread's owner decides.
    """

    users: list[str] = Field(default_factory=list)
    groups: list[str] = Field(default_factory=list)
    needed: int = Field(default=1, ge=1)
    exclude_requester: bool = False
    escalation: Escalation | None = None

    def view(self, owner: str, asked_at: datetime) -> ApproversView:
        """The policy as the interrupt asked at ``asked_at`` on ``owner``'s thread shows it."""
        escalation = self.escalation
        users = self.users if self.users or self.groups else [owner]
        return ApproversView(
            users=list(users),
            groups=list(self.groups),
            needed=self.needed,
            exclude_requester=self.exclude_requester,
            escalation=EscalationView(
                at=asked_at + escalation.after, users=escalation.users, groups=escalation.groups
            )
            if escalation is not None
            else None,
        )


OWNER_DECIDES = Approvers()
"""The policy of a question that names none: the thread's owner decides."""


class EscalationView(Model):
    """An escalation as clients see it: from ``at`` on, these may decide too."""

    at: datetime
    users: list[str] = Field(default_factory=list)
    groups: list[str] = Field(default_factory=list)
    escalated: bool = False
    """Whether the thread has escalated (and sent the notice); ``at`` alone decides who
    is eligible."""


class ApproversView(Model):
    """``Interrupt.metadata.approvers``: who is being waited on, and how far along.

    The thread keeps it current (``received``, ``approvedBy``, ``escalation.escalated``)
    while the interrupt is open, so any client can show who the thread waits for.
    """

    users: list[str]
    groups: list[str] = Field(default_factory=list)
    needed: int = 1
    received: int = 0
    """Approvals counted so far, toward the answer in ``approvedBy``'s approvals."""
    approved_by: list[str] = Field(default_factory=list)
    exclude_requester: bool = False
    escalation: EscalationView | None = None

    def admits(self, subject: str, groups: Collection[str], is_owner: bool, now: datetime) -> bool:
        """Whether ``subject`` (in ``groups``; the thread's owner or not) may decide now."""
        if self.exclude_requester and is_owner:
            return False
        if _named(subject, groups, self.users, self.groups):
            return True
        escalation = self.escalation
        return (
            escalation is not None
            and now >= escalation.at
            and _named(subject, groups, escalation.users, escalation.groups)
        )

    @classmethod
    def of(cls, metadata: dict[str, Any] | None) -> ApproversView | None:
        """The view in an interrupt's ``metadata``, if it has one."""
        shown = (metadata or {}).get(METADATA_KEY)
        return cls.model_validate(shown) if isinstance(shown, dict) else None


def _named(
    subject: str, groups: Collection[str], users: Collection[str], named: Collection[str]
) -> bool:
    return subject in users or any(group in named for group in groups)


def with_view(metadata: dict[str, Any] | None, view: ApproversView) -> dict[str, Any]:
    """An interrupt's ``metadata`` showing ``view`` under :data:`METADATA_KEY` (camelCase
    JSON): the key is the engine's, so it replaces whatever an agent put there."""
    shown = view.model_dump(mode="json", by_alias=True, exclude_none=True)
    return {**(metadata or {}), METADATA_KEY: shown}


def no_stricter(edit: ApproversView, asked: ApproversView, now: datetime) -> bool:
    """Whether an approval's edit, which would be asked under ``edit``, may be decided
    under ``asked``, the policy its interrupt was asked under.

    Conservatively: whoever ``asked`` admits now must be admitted by ``edit`` too, and
    ``edit`` needs no more approvals. So the edit needs at most ``asked.needed``
    approvals; its users and groups include ``asked``'s; it excludes the requester only
    if ``asked`` does; and each escalation target of ``asked`` already due (``at`` <=
    ``now``) is among ``edit``'s users and groups or its own escalation targets due by
    then. Equal policies always pass. Anything else (another group instead, a cheaper
    band that only the owner decides) is refused, even where it looks laxer: the
    approvals being collected would not be the ones the edit's policy asks for.

    Args:
        edit: The policy the edited arguments need, resolved as at the interrupt's asking.
        asked: The interrupt's policy.
        now: The moment of the decision, for escalations.
    """
    if edit.needed > asked.needed or (edit.exclude_requester and not asked.exclude_requester):
        return False
    users, groups = set(edit.users), set(edit.groups)
    if not (set(asked.users) <= users and set(asked.groups) <= groups):
        return False
    due = asked.escalation
    if due is None or due.at > now:
        return True
    extra = edit.escalation
    if extra is not None and extra.at <= now:
        users |= set(extra.users)
        groups |= set(extra.groups)
    return set(due.users) <= users and set(due.groups) <= groups


class Ballot(Model):
    """What the thread keeps of an open interrupt's approval besides what clients see
    (``ThreadState.ballots``).

    The policy and the approvals counted so far are the interrupt's own
    ``metadata.approvers`` (:class:`ApproversView`), kept current: one copy, so a thread
    with every interrupt open at its budget still fits what continue-as-new carries.
    """

    asked_at: datetime
    """When the interrupt was asked: an edit's policy is resolved as of then."""
    call: BoundCall | None = None
    """The tool call an approval is about: an approval gives it a permit."""
    answer_key: str | None = None
    """The payload the view's ``approved_by`` approved (its canonical digest)."""
    notice_due: bool = False
    """The escalation notice is due and not yet delivered (or given up on): a
    continue-as-new sends it again, with the same idempotency key."""


Verdict = Literal["settled", "pending", "repeated"]


@dataclass(frozen=True)
class Count:
    """What one decision did to an interrupt's approvals (see :func:`count`)."""

    verdict: Verdict
    view: ApproversView
    """The interrupt's view after it (the same one unless an approval counted)."""
    superseded: list[str]
    """Principals whose approvals no longer count: they approved another payload."""


def count(
    view: ApproversView, counted: str | None, principal: str, answer_key: str, approval: bool
) -> Count:
    """Count ``principal``'s decision by the rule in this module's docstring.

    Args:
        view: The interrupt's view, with the approvals so far; not changed.
        counted: The answer those approvals are for (``Ballot.answer_key``).
        principal: Who decides (admitted: the caller checked).
        answer_key: The decision's canonical digest (status and payload).
        approval: A ``resolved`` that is not a denial; a denial or a cancel settles at once.
    """
    if not approval:
        return Count("settled", view, [])
    same = answer_key == counted
    if same and principal in view.approved_by:
        return Count("repeated", view, [])
    approved_by = [*(view.approved_by if same else []), principal]
    verdict: Verdict = "settled" if len(approved_by) >= view.needed else "pending"
    after = view.model_copy(update={"approved_by": approved_by, "received": len(approved_by)})
    return Count(verdict, after, [] if same else list(view.approved_by))


class BoundCall(Model):
    """The tool call an approval is about: what a permit binds (set by the SDK)."""

    name: str
    arguments: dict[str, Any]
    agent: str | None = None
    """The sub-agent whose tool it is; ``None``: the thread's own agent's."""


def arguments_digest(arguments: dict[str, Any]) -> str:
    """``sha256:<hex>`` of ``arguments`` as canonical JSON (sorted keys, no spaces)."""
    canonical = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()
