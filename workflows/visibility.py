"""What operators and the gateway's listings see of a thread without querying it: its
search attributes and memo, computed from the thread's data by pure functions.

The thread publishes them when a run starts or ends, and hands them to the next
workflow run when it continues as new (Temporal would otherwise start that run with
the first run's values).
"""

from __future__ import annotations

import hashlib
import re
from datetime import datetime
from typing import Any

from temporalio import workflow
from temporalio.common import SearchAttributePair, SearchAttributeUpdate

with workflow.unsafe.imports_passed_through():
    from ag_ui.core import Interrupt

    from workflows import budgets, search_attributes
    from workflows.interrupts import parse_expiry
    from workflows.models import ThreadStatus

PLAIN_OWNER = re.compile(r"[\w.@|:+\-]{1,200}")
"""Subjects stored as they are: what OIDC providers issue (UUIDs, ``auth0|…``, emails)."""

INTERRUPTS_MEMO = "interrupts"
"""Memo key of the open interrupts (AG-UI JSON), which visibility lists return."""


def owner_key(subject: str) -> str:
    """The thread owner as its search attribute holds it: the subject itself when it is
    plain, so operators can filter by it; otherwise its digest. Either way a listing's
    query can name it without quoting anything a client chose."""
    if PLAIN_OWNER.fullmatch(subject):
        return subject
    return "sha256:" + hashlib.sha256(subject.encode()).hexdigest()


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
            so the attribute stays within Temporal's size limit of a value.
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


def memo(waiting_on: list[Interrupt]) -> dict[str, Any]:
    """The memo: the open interrupts as clients see them (``GET /interrupts``), at most
    ``budgets.MAX_INTERRUPTS_PER_RUN`` (all a thread can have open), each cut to its
    budget (``budgets.memo_interrupt``)."""
    shown = waiting_on[: budgets.MAX_INTERRUPTS_PER_RUN]
    return {INTERRUPTS_MEMO: [budgets.memo_interrupt(interrupt) for interrupt in shown]}


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
        )
    ]
