"""Erasing threads: a thread's workflows and their histories deleted from Temporal.

One way for both who erase: ``DELETE /threads/{threadId}`` calls :func:`delete_thread`
itself, and the retention sweep (``workflows/retention.py``) runs
:func:`sweep_idle_threads`, which deletes each thread idle past the retention the same way.

A thread is every run of its workflow's continue-as-new chain, closed runs included, and
the workflows started under it (sub-agents' child workflows, whose root is the thread's
workflow). Temporal's ``DeleteWorkflowExecution`` terminates a running execution, then
deletes it and its history asynchronously: the running one is gone from reads at once
and from listings as fast as visibility catches up; closed runs once Temporal's transfer
queue has acknowledged their close (some 30 s on a default server).
"""

from __future__ import annotations

import asyncio
from datetime import datetime

from temporalio import activity
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.workflowservice.v1 import DeleteWorkflowExecutionRequest
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from workflows import search_attributes
from workflows.models import SweepReport, SweepRequest
from workflows.thread_ids import thread_id_of

DELETE_PAGE = 100
"""Runs listed, then deleted concurrently, per visibility page: a thread of thousands of
runs is deleted a page at a time, never with thousands of calls in flight."""


async def delete_thread(client: Client, workflow_id: str, run_id: str | None) -> int:
    """Delete the thread workflow ``workflow_id``: every run of its chain and every
    workflow whose root it is; how many executions Temporal accepted to delete.

    The current run goes first, so the chain cannot continue as new while its older runs
    are listed; visibility then finds the rest, a page at a time.

    Args:
        client: A client of the thread's namespace.
        workflow_id: The thread's workflow id (``workflows.thread_ids.workflow_id_for``).
        run_id: Its current run, as described or listed; ``None``: whichever is current.

    Raises:
        RPCError: Temporal refused or could not be reached (a run already gone is
            not an error: deleting is idempotent).
    """
    deleted = int(await _delete(client, workflow_id, run_id))
    query = f"WorkflowId = '{workflow_id}' OR RootWorkflowId = '{workflow_id}'"
    page_token: bytes | None = None
    while True:
        page = client.list_workflows(query, page_size=DELETE_PAGE, next_page_token=page_token)
        await page.fetch_next_page()
        runs = [(each.id, each.run_id) for each in page.current_page or []]
        others = [run for run in runs if run != (workflow_id, run_id)]
        deleted += sum(await asyncio.gather(*(_delete(client, *run) for run in others)))
        page_token = page.next_page_token
        if not page_token:
            return deleted


async def _delete(client: Client, workflow_id: str, run_id: str | None) -> bool:
    """Ask Temporal to delete one execution; ``False`` if it is gone already."""
    try:
        await client.workflow_service.delete_workflow_execution(
            DeleteWorkflowExecutionRequest(
                namespace=client.namespace,
                workflow_execution=WorkflowExecution(workflow_id=workflow_id, run_id=run_id or ""),
            )
        )
    except RPCError as err:
        if err.status != RPCStatusCode.NOT_FOUND:
            raise
        return False
    return True


def idle_query(thread_type: str, task_queue: str, cutoff: datetime) -> str:
    """The visibility query for live threads of ``task_queue`` whose last run or decision
    (``AguiLastActivity``) was before ``cutoff``."""
    moment = cutoff.isoformat().replace("+00:00", "Z")
    return (
        f'WorkflowType = "{thread_type}" AND ExecutionStatus = "Running"'
        f' AND TaskQueue = "{task_queue}"'
        f' AND {search_attributes.LAST_ACTIVITY.name} < "{moment}"'
    )


@activity.defn
async def sweep_idle_threads(request: SweepRequest) -> SweepReport:
    """Delete up to ``request.limit`` threads idle since before ``request.cutoff``, as
    ``DELETE /threads/{threadId}`` would; the next sweep takes any left."""
    client = activity.client()
    query = idle_query(request.thread_type, request.task_queue, request.cutoff)
    page = client.list_workflows(query, page_size=request.limit)
    await page.fetch_next_page()
    idle = page.current_page or []
    for execution in idle:
        await delete_thread(client, execution.id, execution.run_id)
        last = execution.typed_search_attributes.get(search_attributes.LAST_ACTIVITY)
        thread_id = thread_id_of(execution.id)
        activity.logger.info(
            "thread %s deleted by retention: idle since %s",
            thread_id,
            last,
            extra={"thread_id": thread_id, "outcome": "deleted"},
        )
        activity.heartbeat()
    return SweepReport(deleted=len(idle), more=bool(page.next_page_token))
