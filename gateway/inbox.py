"""Threads and their open interrupts, listed through Temporal visibility.

Every thread workflow publishes its status, agent and open interrupts' reasons as search
attributes and its open interrupts in its memo (``ThreadWorkflow._publish_status``), so a
list is one visibility query: no thread is queried or replayed to build it.

The inbox shows a caller the interrupts they may decide, whoever's thread holds them
(the thread lists who may in ``AguiApprovers``; each interrupt's ``metadata.approvers``
says for sure), and those of their own threads.

SQL visibility (the dev server, PostgreSQL) cannot sort by a custom attribute, so the
interrupt inbox reads every matching thread's memo and sorts by deadline itself, with a
cursor that stays valid as interrupts come and go. That is one visibility page per 1,000
waiting threads per request; beyond some ten thousand, use Elasticsearch visibility
and ``ORDER BY AguiNextExpiry``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from collections.abc import Sequence
from datetime import datetime
from typing import Literal

from ag_ui.core import Interrupt
from pydantic import ValidationError
from temporalio.client import Client, WorkflowExecution

from gateway.auth import Principal
from workflows import search_attributes, visibility
from workflows.approvers import ApproversView
from workflows.interrupts import parse_expiry
from workflows.models import Model, ThreadStatus
from workflows.thread import ThreadWorkflow
from workflows.thread_ids import thread_id_of
from workflows.visibility import ASKED_AT_MEMO, INTERRUPTS_MEMO, OWNER_MEMO

FILTER_VALUE = re.compile(r"[\w:.\-]+")
"""What an agent, status or reason filter may contain: no quotes, so no query injection."""


class InvalidCursor(ValueError):
    """A page token or cursor this gateway did not hand out."""


class ThreadSummary(Model):
    """One thread as ``GET /threads`` lists it."""

    thread_id: str
    agent: str | None
    status: str | None
    """``idle``, ``running`` or ``waiting``."""
    last_activity: datetime | None
    open_interrupts: int


class ThreadPage(Model):
    threads: list[ThreadSummary]
    next_page_token: str | None
    """Pass as ``pageToken`` for the next page; ``None`` on the last."""


InboxRole = Literal["decide", "mine"]
"""Which of a caller's interrupts the inbox lists: those they may decide, or those of
their own threads (whoever decides them)."""


class InboxItem(Model):
    """One open interrupt (its message, schema, deadline and, in ``metadata.approvers``,
    who may decide it and the approvals so far) and the thread it holds."""

    thread_id: str
    agent: str | None
    interrupt: Interrupt
    owner: str | None = None
    """Who asked: the thread's owner (unknown for a thread last published before the
    engine put it in the memo)."""
    asked_at: datetime | None = None
    """When it was asked (unknown for a thread last published before the engine put it
    in the memo)."""
    may_decide: bool = False
    """Whether the caller may decide it now."""
    mine: bool = False
    """Whether it is on one of the caller's own threads."""


class InboxPage(Model):
    interrupts: list[InboxItem]
    next_cursor: str | None
    """Pass as ``cursor`` for the interrupts after this page; ``None`` on the last."""


def thread_query(
    task_queue: str,
    owner: str | None,
    agent: str | None = None,
    status: ThreadStatus | None = None,
    reason: str | None = None,
    approvers: Sequence[str] = (),
) -> str:
    """The visibility query for live threads of ``task_queue`` matching the filters,
    those of ``owner`` only unless it is ``None`` (an admin's listing), or with
    ``owner``, those waiting on any of ``approvers`` too (``AguiApprovers`` entries, as
    :func:`approver_entries` makes them).

    Raises:
        ValueError: A filter value that is not a plain name.
    """
    clauses = [
        f'WorkflowType = "{ThreadWorkflow.__name__}"',
        'ExecutionStatus = "Running"',
        f'TaskQueue = "{task_queue}"',
    ]
    if owner is not None:
        # owner_key and approver keys are plain or digests: nothing in them needs quoting.
        mine = f'{search_attributes.OWNER.name} = "{visibility.owner_key(owner)}"'
        if approvers:
            listed = ", ".join(f'"{entry}"' for entry in approvers)
            mine = f"({mine} OR {search_attributes.APPROVERS.name} IN ({listed}))"
        clauses.append(mine)
    for key, value in (
        (search_attributes.AGENT, agent),
        (search_attributes.THREAD_STATUS, status),
        (search_attributes.INTERRUPT_REASONS, reason),
    ):
        if value is not None:
            if not FILTER_VALUE.fullmatch(value):
                raise ValueError(f"{value!r} is not a valid {key.name} filter")
            clauses.append(f'{key.name} = "{value}"')
    return " AND ".join(clauses)


def approver_entries(principal: Principal) -> list[str]:
    """The ``AguiApprovers`` entries that may name ``principal``: its subject, its
    groups, and the mark of threads whose approvers did not all fit the attribute."""
    return [
        visibility.approver_key("u", principal.subject),
        *sorted({visibility.approver_key("g", group) for group in principal.groups}),
        visibility.MORE_APPROVERS,
    ]


async def list_threads(
    client: Client, query: str, page_size: int, page_token: str | None
) -> ThreadPage:
    """One page of the threads ``query`` matches, in visibility's order."""
    executions = client.list_workflows(
        query, page_size=page_size, next_page_token=_token_bytes(page_token)
    )
    await executions.fetch_next_page()
    threads = [await _summary(execution) for execution in executions.current_page or []]
    token = executions.next_page_token
    return ThreadPage(threads=threads, next_page_token=_token(token) if token else None)


async def list_interrupts(
    client: Client,
    query: str,
    principal: Principal,
    role: InboxRole | None,
    reason: str | None,
    limit: int,
    cursor: str | None,
    now: datetime,
) -> InboxPage:
    """The open interrupts of the threads ``query`` matches that ``principal`` may
    decide at ``now`` (``role="decide"``), that are on its own threads (``"mine"``), or
    either (``None``; an admin: every one), soonest deadline first (those without one
    last), ``limit`` at a time after ``cursor``."""
    after = _cursor_key(cursor) if cursor else None
    items = []
    async for execution in client.list_workflows(query):
        attributes = execution.typed_search_attributes
        agent = attributes.get(search_attributes.AGENT)
        owner = await _owner(execution)
        asked_at = await _asked_at(execution)
        mine = _is_owner(principal, owner, attributes.get(search_attributes.OWNER))
        for interrupt in await _interrupts(execution):
            if reason is not None and interrupt.reason != reason:
                continue
            decides = may_decide(interrupt, principal, mine, now)
            if _in_role(role, decides, mine, principal.admin):
                items.append(
                    InboxItem(
                        thread_id=_thread_id(execution),
                        agent=agent,
                        interrupt=interrupt,
                        owner=owner,
                        asked_at=asked_at,
                        may_decide=decides,
                        mine=mine,
                    )
                )
    items.sort(key=_sort_key)
    if after is not None:
        items = [item for item in items if _sort_key(item) > after]
    page = items[:limit]
    more = len(items) > limit
    return InboxPage(interrupts=page, next_cursor=_cursor(page[-1]) if more else None)


def _is_owner(principal: Principal, owner: str | None, owner_attribute: str | None) -> bool:
    """Whether the thread of ``owner`` (as its memo says; ``None`` in a memo from before
    the engine put it there, when ``AguiOwner`` says) is ``principal``'s."""
    if owner is not None:
        return owner == principal.subject
    return owner_attribute == visibility.owner_key(principal.subject)


def _in_role(role: InboxRole | None, may_decide: bool, mine: bool, admin: bool) -> bool:
    if role == "decide":
        return may_decide
    if role == "mine":
        return mine
    return may_decide or mine or admin


def may_decide(interrupt: Interrupt, principal: Principal, mine: bool, now: datetime) -> bool:
    """Whether ``principal`` may decide ``interrupt`` at ``now``: as its approvers say,
    or, for an interrupt that names none (or none that parse), when it is theirs."""
    try:
        view = ApproversView.of(interrupt.metadata)
    except ValidationError:
        view = None
    if view is None:
        return mine
    return view.admits(principal.subject, principal.groups, mine, now)


async def _summary(execution: WorkflowExecution) -> ThreadSummary:
    attributes = execution.typed_search_attributes
    return ThreadSummary(
        thread_id=_thread_id(execution),
        agent=attributes.get(search_attributes.AGENT),
        status=attributes.get(search_attributes.THREAD_STATUS),
        last_activity=attributes.get(search_attributes.LAST_ACTIVITY),
        open_interrupts=len(attributes.get(search_attributes.INTERRUPT_IDS) or []),
    )


async def _interrupts(execution: WorkflowExecution) -> list[Interrupt]:
    interrupts: list[Interrupt] = await execution.memo_value(
        INTERRUPTS_MEMO, [], type_hint=list[Interrupt]
    )
    return interrupts


async def _owner(execution: WorkflowExecution) -> str | None:
    owner: str | None = await execution.memo_value(OWNER_MEMO, None, type_hint=str)
    return owner


async def _asked_at(execution: WorkflowExecution) -> datetime | None:
    asked_at: datetime | None = await execution.memo_value(ASKED_AT_MEMO, None, type_hint=datetime)
    return asked_at


def _thread_id(execution: WorkflowExecution) -> str:
    # The query names only thread workflows.
    return thread_id_of(execution.id) or execution.id


SortKey = tuple[bool, datetime, str, str]


def _sort_key(item: InboxItem) -> SortKey:
    deadline = parse_expiry(item.interrupt)
    return (deadline is None, deadline or datetime.max, item.thread_id, item.interrupt.id)


def _cursor(item: InboxItem) -> str:
    never, deadline, thread_id, interrupt_id = _sort_key(item)
    raw = json.dumps([never, deadline.isoformat(), thread_id, interrupt_id])
    return base64.urlsafe_b64encode(raw.encode()).decode()


def _cursor_key(cursor: str) -> SortKey:
    try:
        never, deadline, thread_id, interrupt_id = json.loads(base64.urlsafe_b64decode(cursor))
        moment = datetime.fromisoformat(deadline)
    except (ValueError, TypeError, binascii.Error) as err:
        raise InvalidCursor(f"{cursor!r} is not a cursor of this gateway") from err
    # Deadlines are in UTC; only "no deadline" sorts as the naive datetime.max.
    if (moment.tzinfo is None) != bool(never):
        raise InvalidCursor(f"{cursor!r} is not a cursor of this gateway")
    return (bool(never), moment, str(thread_id), str(interrupt_id))


TOKEN_CHECK_BYTES = 8
"""A page token ends with this much of its SHA-256: a token mangled in transit or made
up is a clear 422 here, not an opaque failure of the visibility store."""


def _token(raw: bytes) -> str:
    check = hashlib.sha256(raw).digest()[:TOKEN_CHECK_BYTES]
    return base64.urlsafe_b64encode(raw + check).decode()


def _token_bytes(token: str | None) -> bytes | None:
    if token is None:
        return None
    try:
        data = base64.b64decode(token.encode(), altchars=b"-_", validate=True)
    except (ValueError, binascii.Error) as err:
        raise InvalidCursor(f"{token!r} is not a page token of this gateway") from err
    raw, check = data[:-TOKEN_CHECK_BYTES], data[-TOKEN_CHECK_BYTES:]
    if not raw or hashlib.sha256(raw).digest()[:TOKEN_CHECK_BYTES] != check:
        raise InvalidCursor(f"{token!r} is not a page token of this gateway")
    return raw
