"""Who may answer an interrupt: approver policies, as agents declare them and as clients
see them, and the permit an approved tool call runs under.

An agent says who may answer where it asks (:class:`Approvers` on an ``Ask``); without
one, the thread's owner answers, as a chat always has. When the thread opens the
interrupt it resolves the policy against the thread (its owner, the moment of asking)
into :class:`ApproversView`, which every client sees as ``Interrupt.metadata.approvers``
and which the gateway checks a decider against (:meth:`ApproversView.admits`). Pure
models and functions: the workflow, the SDK, activities and the gateway all import it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection
from datetime import datetime, timedelta
from typing import Any

from pydantic import Field

from workflows.models import Model

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


class BoundCall(Model):
    """The tool call an approval is about: what a permit binds (set by the SDK)."""

    name: str
    arguments: dict[str, Any]


def arguments_digest(arguments: dict[str, Any]) -> str:
    """``sha256:<hex>`` of ``arguments`` as canonical JSON (sorted keys, no spaces)."""
    canonical = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()
