"""Threads and their open interrupts: ``GET /threads``, ``GET /threads/{thread_id}`` and
the approval inbox ``GET /interrupts``."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Query

from gateway.auth import Principal, may_read
from gateway.deps import (
    AUTHENTICATED,
    Agents,
    AgentsDep,
    ClientDep,
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
    thread_query,
)
from gateway.streaming import thread_handle
from settings import Settings
from workflows.models import ThreadStatus, ThreadView
from workflows.thread import ThreadWorkflow

router = APIRouter(dependencies=AUTHENTICATED)


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


@router.get("/threads/{thread_id}")
async def thread(thread_id: ThreadIdPath, principal: PrincipalDep, client: ClientDep) -> ThreadView:
    """The thread's messages, state and runs, for its owner (and admins)."""
    try:
        view = await thread_handle(client, thread_id).query(ThreadWorkflow.view)
    except TEMPORAL_ERRORS as err:
        raise thread_read_error(thread_id, err) from err
    if not may_read(principal, view.owner):
        raise unknown_thread(thread_id)
    return view


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
