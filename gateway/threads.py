"""Threads and their open interrupts: ``GET /threads``, ``GET /threads/{thread_id}``, the
approval inbox ``GET /interrupts``, one interrupt as its approvers see it, and erasing a
thread, ``DELETE /threads/{thread_id}``."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Annotated

from ag_ui.core import Interrupt, Message
from fastapi import APIRouter, Query, Response
from temporalio.client import Client

from activities.erasure import delete_thread
from gateway.auth import Principal, may_read
from gateway.deps import (
    AUTHENTICATED,
    Agents,
    AgentsDep,
    ClientDep,
    InterruptIdPath,
    PrincipalDep,
    SettingsDep,
    ThreadIdPath,
    no_agent_named,
)
from gateway.errors import (
    TEMPORAL_ERRORS,
    ApiError,
    GatewayErrorCode,
    temporal_error,
    thread_read_error,
    unknown_thread,
)
from gateway.inbox import (
    InboxPage,
    InboxRole,
    InvalidCursor,
    ThreadPage,
    approver_entries,
    list_interrupts,
    list_threads,
    may_decide,
    thread_query,
)
from gateway.streaming import READ_TIMEOUT, thread_handle
from settings import Settings
from workflows import search_attributes, visibility
from workflows.models import AuditRecord, Model, ThreadStatus, ThreadView
from workflows.thread import ThreadWorkflow
from workflows.view import asked_at

router = APIRouter(dependencies=AUTHENTICATED)
audit_log = logging.getLogger("gateway.audit")


class InterruptView(Model):
    """One interrupt as ``GET /threads/{thread_id}/interrupts/{interrupt_id}`` shows it to
    the people who may decide it: what they need to decide it, and what came of it."""

    thread_id: str
    agent: str
    owner: str
    """Who asked: the thread's owner."""
    asked_at: datetime | None
    """When, while it is open."""
    open: bool
    """Whether it still waits for a decision."""
    interrupt: Interrupt | None
    """The interrupt, with its approvals so far, while it is open."""
    may_decide: bool
    """Whether the caller may decide it now."""
    messages: list[Message]
    """The conversation up to the question, while it is open."""
    audit: list[AuditRecord]
    """The thread's audit records about it: who decided what, and when."""


@router.get("/threads")
async def threads(
    principal: PrincipalDep,
    client: ClientDep,
    settings: SettingsDep,
    agents: AgentsDep,
    agent: Annotated[str | None, Query()] = None,
    status: Annotated[ThreadStatus | None, Query()] = None,
    page_size: Annotated[int, Query(alias="pageSize", ge=1, le=1000)] = 100,
    page_token: Annotated[str | None, Query(alias="pageToken")] = None,
) -> ThreadPage:
    """The caller's threads (an admin's: every thread) on this gateway's task queue,
    with their status."""
    query = _visibility_query(settings, agents, principal, agent=agent, status=status)
    with _listing_errors():
        return await list_threads(client, query, page_size, page_token)


# None fields are left out, ``nextCursor`` on the last page among them, as the inbox
# has always answered.
@router.get("/interrupts", response_model_exclude_none=True)
async def interrupts(
    principal: PrincipalDep,
    client: ClientDep,
    settings: SettingsDep,
    agents: AgentsDep,
    agent: Annotated[str | None, Query()] = None,
    reason: Annotated[str | None, Query()] = None,
    role: Annotated[InboxRole | None, Query()] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    cursor: Annotated[str | None, Query()] = None,
) -> InboxPage:
    """Open interrupts the caller may decide, whoever's thread holds them, and those of
    the caller's own threads (an admin's: every one), soonest deadline first: an
    approval inbox. ``?role=decide`` lists only the first, ``?role=mine`` the second."""
    # Only the caller's own threads need no approvers' attribute to find them.
    approvers = [] if role == "mine" else approver_entries(principal)
    query = _visibility_query(
        settings,
        agents,
        principal,
        agent=agent,
        status="waiting",
        reason=reason,
        approvers=approvers,
    )
    now = datetime.now(UTC)
    with _listing_errors():
        return await list_interrupts(client, query, principal, role, reason, limit, cursor, now)


async def _read_view(client: Client, thread_id: str) -> ThreadView:
    """The thread as its workflow shows it; a read no worker answers within
    ``READ_TIMEOUT`` is a 503 to retry."""
    try:
        return await thread_handle(client, thread_id).query(
            ThreadWorkflow.view, rpc_timeout=READ_TIMEOUT
        )
    except TEMPORAL_ERRORS as err:
        raise thread_read_error(thread_id, err) from err


@router.get("/threads/{thread_id}")
async def thread(thread_id: ThreadIdPath, principal: PrincipalDep, client: ClientDep) -> ThreadView:
    """The thread's messages, state and runs, for its owner (and admins)."""
    view = await _read_view(client, thread_id)
    if not may_read(principal, view.owner):
        raise unknown_thread(thread_id)
    return view


@router.delete("/threads/{thread_id}", status_code=204, response_class=Response)
async def erase(thread_id: ThreadIdPath, principal: PrincipalDep, client: ClientDep) -> Response:
    """Delete the thread, for its owner (and admins): every run of its workflow and every
    workflow under it, with their histories (``activities/erasure.py``). 204 once
    Temporal has accepted the deletions; to anyone else, and for a thread that is gone,
    404 as ``GET`` answers. The thread id is free again: a run naming it starts a new,
    empty thread.

    Who owns it is read from its ``AguiOwner`` search attribute, so a thread whose agent
    no worker serves any more can still be erased.
    """
    handle = thread_handle(client, thread_id)
    try:
        described = await handle.describe()
    except TEMPORAL_ERRORS as err:
        raise thread_read_error(thread_id, err) from err
    owner = described.typed_search_attributes.get(search_attributes.OWNER)
    if not (principal.admin or owner == visibility.owner_key(principal.subject)):
        raise unknown_thread(thread_id)
    try:
        deleted = await delete_thread(client, handle.id, described.run_id)
    except TEMPORAL_ERRORS as err:
        raise temporal_error(err) from err
    # Who erased which thread, and nothing of what it held.
    audit_log.info(
        "thread deleted: %s by %s (%d workflow runs)",
        thread_id,
        principal.subject,
        deleted,
        extra={"thread_id": thread_id, "outcome": "deleted"},
    )
    return Response(status_code=204)


@router.get("/threads/{thread_id}/interrupts/{interrupt_id}")
async def interrupt(
    thread_id: ThreadIdPath,
    interrupt_id: InterruptIdPath,
    principal: PrincipalDep,
    client: ClientDep,
) -> InterruptView:
    """One interrupt, for the thread's owner and admins, whoever may decide it now and
    whoever decided it; to anyone else, the thread does not exist."""
    thread = await _read_view(client, thread_id)
    asked = next((each for each in thread.interrupts if each.id == interrupt_id), None)
    audit = [record for record in thread.audit if record.interrupt_id == interrupt_id]
    mine = principal.subject == thread.owner
    decides = asked is not None and may_decide(asked, principal, mine, datetime.now(UTC))
    decided = any(record.principal == principal.subject for record in audit)
    if not (may_read(principal, thread.owner) or decides or decided):
        raise unknown_thread(thread_id)
    return InterruptView(
        thread_id=thread.thread_id,
        agent=thread.agent,
        owner=thread.owner,
        asked_at=asked_at(thread.runs) if asked is not None else None,
        open=asked is not None,
        interrupt=asked,
        may_decide=decides,
        messages=thread.messages if asked is not None else [],
        audit=audit,
    )


def _visibility_query(
    settings: Settings,
    agents: Agents,
    principal: Principal,
    agent: str | None = None,
    status: ThreadStatus | None = None,
    reason: str | None = None,
    approvers: Sequence[str] = (),
) -> str:
    """The visibility query for the filters, or a 422 naming the bad one: the caller's
    threads and, with ``approvers``, those waiting on any of them (an admin's: all)."""
    if agent is not None and agent not in agents:
        raise ApiError(422, GatewayErrorCode.INVALID_FILTER, no_agent_named(agent, agents))
    try:
        owner = None if principal.admin else principal.subject
        return thread_query(
            settings.task_queue,
            owner,
            agent=agent,
            status=status,
            reason=reason,
            approvers=approvers,
        )
    except ValueError as err:
        raise ApiError(422, GatewayErrorCode.INVALID_FILTER, str(err)) from err


@contextmanager
def _listing_errors() -> Iterator[None]:
    """A listing's failures as HTTP errors: a bad cursor is 422, Temporal's as
    :func:`temporal_error` says."""
    try:
        yield
    except InvalidCursor as err:
        raise ApiError(422, GatewayErrorCode.INVALID_CURSOR, str(err)) from err
    except TEMPORAL_ERRORS as err:
        raise temporal_error(err) from err
