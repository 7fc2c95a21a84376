"""What operators and the gateway's listings see of a thread without querying it: its
search attributes and memo, computed from the thread's data by pure functions.

The thread publishes them when a run starts or ends, and hands them to the next
workflow run when it continues as new (Temporal would otherwise start that run with
the first run's values).
"""

from __future__ import annotations

import hashlib
import json
import re
from datetime import datetime
from typing import Any, Literal

from temporalio import workflow
from temporalio.common import SearchAttributePair, SearchAttributeUpdate

with workflow.unsafe.imports_passed_through():
    from ag_ui.core import Interrupt
    from pydantic import ValidationError

    from workflows import budgets, search_attributes
    from workflows.approvers import METADATA_KEY, ApproversView
    from workflows.interrupts import parse_expiry
    from workflows.models import ThreadStatus

PLAIN_OWNER = re.compile(r"[\w.@|:+\-]{1,200}")
"""Subjects stored as they are: what OIDC providers issue (UUIDs, ``auth0|…``, emails)."""

INTERRUPTS_MEMO = "interrupts"
"""Memo key of the open interrupts (AG-UI JSON), which visibility lists return."""
OWNER_MEMO = "owner"
"""Memo key of the thread's owner: who asked, as an approver's inbox shows it."""
ASKED_AT_MEMO = "askedAt"
"""Memo key of when the open interrupts were asked (ISO 8601): the end of the run that
paused on them."""

PLAIN_APPROVER = re.compile(r"[\w.@|:+\-]{1,64}")
"""User and group names ``AguiApprovers`` holds as they are (shorter than owners: the
attribute lists many)."""
APPROVER_KEYS_SHOWN = 40
"""The most entries ``AguiApprovers`` lists."""
APPROVER_KEYS_BYTES = 1536
"""The most bytes of ``AguiApprovers`` as JSON: under Temporal's 2 KB for a value."""
MORE_APPROVERS = "*"
"""Listed in ``AguiApprovers`` in place of the entries that did not fit: every inbox
then finds the thread and checks the interrupts' own ``approvers`` instead."""


def owner_key(subject: str) -> str:
    """The thread owner as its search attribute holds it: the subject itself when it is
    plain, so operators can filter by it; otherwise its digest. Either way a listing's
    query can name it without quoting anything a client chose."""
    if PLAIN_OWNER.fullmatch(subject):
        return subject
    return "sha256:" + hashlib.sha256(subject.encode()).hexdigest()


def approver_key(kind: Literal["u", "g"], name: str) -> str:
    """A user (``u``) or group (``g``) as ``AguiApprovers`` lists it: ``<kind>:<name>``
    when the name is plain, else ``<kind>:sha256:<digest>`` (a short one: the gateway
    checks who may decide on the interrupt itself, the attribute only finds it). Either
    way a query can name it without quoting anything a client or an agent chose."""
    if PLAIN_APPROVER.fullmatch(name):
        return f"{kind}:{name}"
    return f"{kind}:sha256:" + hashlib.sha256(name.encode()).hexdigest()[:32]


def approver_keys(waiting_on: list[Interrupt]) -> list[str]:
    """``AguiApprovers``: who may decide ``waiting_on`` (their ``metadata.approvers``,
    escalation targets included), deduplicated, in order of appearance, within
    ``APPROVER_KEYS_SHOWN`` entries and ``APPROVER_KEYS_BYTES``; past those, the rest
    as :data:`MORE_APPROVERS`. An interrupt without a view of its approvers (or with
    one that does not parse) adds nothing: its thread's owner decides it."""
    keys: dict[str, None] = {}
    for interrupt in waiting_on:
        try:
            view = ApproversView.of(interrupt.metadata)
        except ValidationError:
            continue
        if view is None:
            continue
        escalation = view.escalation
        users = [*view.users, *(escalation.users if escalation else [])]
        groups = [*view.groups, *(escalation.groups if escalation else [])]
        keys.update(dict.fromkeys(approver_key("u", user) for user in users))
        keys.update(dict.fromkeys(approver_key("g", group) for group in groups))
    listed = list(keys)
    if len(listed) <= APPROVER_KEYS_SHOWN and _fits(listed):
        return listed
    while len(listed) >= APPROVER_KEYS_SHOWN or not _fits([*listed, MORE_APPROVERS]):
        listed.pop()
    return [*listed, MORE_APPROVERS]


def _fits(keys: list[str]) -> bool:
    # ASCII-escaped JSON: never less than the UTF-8 Temporal measures.
    return len(json.dumps(keys)) <= APPROVER_KEYS_BYTES


def attributes(
    agent: str,
    owner: str,
    status: ThreadStatus,
    at: datetime,
    waiting_on: list[Interrupt] | None,
) -> list[SearchAttributePair[Any]]:
    """The thread's search attributes.

    Args:
        agent: The thread's agent.
        owner: The principal it belongs to.
        status: ``running``, ``waiting`` or ``idle``.
        at: When the thread last changed (``AguiLastActivity``).
        waiting_on: The open interrupts; ``None`` while a run is in progress, when what
            the thread waits on is not settled yet and stays as last published. Their
            ids are listed up to ``budgets.INTERRUPT_IDS_SHOWN`` (a run opens no more),
            so the attribute stays within Temporal's size limit of a value; who may
            decide them as :func:`approver_keys` says.
    """
    pairs: list[SearchAttributePair[Any]] = [
        SearchAttributePair(search_attributes.AGENT, agent),
        SearchAttributePair(search_attributes.OWNER, owner_key(owner)),
        SearchAttributePair(search_attributes.THREAD_STATUS, status),
        SearchAttributePair(search_attributes.LAST_ACTIVITY, at),
    ]
    if waiting_on is not None:
        pairs += [
            SearchAttributePair(
                search_attributes.INTERRUPT_IDS,
                [i.id for i in waiting_on[: budgets.INTERRUPT_IDS_SHOWN]],
            ),
            SearchAttributePair(
                search_attributes.INTERRUPT_REASONS, sorted({i.reason for i in waiting_on})
            ),
            SearchAttributePair(search_attributes.APPROVERS, approver_keys(waiting_on)),
        ]
        deadlines = [d for d in map(parse_expiry, waiting_on) if d is not None]
        if deadlines:
            pairs.append(SearchAttributePair(search_attributes.NEXT_EXPIRY, min(deadlines)))
    return pairs


def updates(
    pairs: list[SearchAttributePair[Any]], settled: bool
) -> list[SearchAttributeUpdate[Any]]:
    """``pairs`` as upserts; once settled, an earliest deadline it lacks is unset."""
    changes: list[SearchAttributeUpdate[Any]] = [pair.key.value_set(pair.value) for pair in pairs]
    if settled and all(pair.key != search_attributes.NEXT_EXPIRY for pair in pairs):
        changes.append(search_attributes.NEXT_EXPIRY.value_unset())
    return changes


def memo(
    waiting_on: list[Interrupt], owner: str, asked_at: datetime | None = None
) -> dict[str, Any]:
    """The memo: the open interrupts as clients see them (``GET /interrupts``), at most
    ``budgets.MAX_INTERRUPTS_PER_RUN`` (all a thread can have open), each cut to its
    budget (``budgets.memo_interrupt``) but for who may decide it; the thread's owner,
    who asked them; and when, if they were asked in a run."""
    shown = waiting_on[: budgets.MAX_INTERRUPTS_PER_RUN]
    kept: dict[str, Any] = {
        INTERRUPTS_MEMO: [_memo_interrupt(interrupt) for interrupt in shown],
        OWNER_MEMO: owner,
    }
    if shown and asked_at is not None:
        kept[ASKED_AT_MEMO] = asked_at.isoformat()
    return kept


def _memo_interrupt(interrupt: Interrupt) -> dict[str, Any]:
    """``interrupt`` as the memo lists it, its ``metadata.approvers`` kept even when it
    is cut: an inbox cannot tell who may decide it without them (an interrupt's whole
    budget, ``budgets.MAX_INTERRUPT_BYTES``, bounds them)."""
    shown = budgets.memo_interrupt(interrupt)
    approvers = (interrupt.metadata or {}).get(METADATA_KEY)
    metadata = shown.get("metadata")
    if approvers is not None and isinstance(metadata, dict) and metadata.get("truncated"):
        metadata[METADATA_KEY] = approvers
    return shown


def cleared() -> list[SearchAttributeUpdate[Any]]:
    """Upserts that leave a workflow run nothing to be found by but its agent, owner and
    last activity: for a run that hands the thread on to the next by continue-as-new."""
    return [
        key.value_unset()
        for key in (
            search_attributes.THREAD_STATUS,
            search_attributes.INTERRUPT_IDS,
            search_attributes.INTERRUPT_REASONS,
            search_attributes.NEXT_EXPIRY,
            search_attributes.APPROVERS,
        )
    ]
