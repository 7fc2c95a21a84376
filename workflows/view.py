"""What the thread shows operators and clients of itself, computed from its data alone.

Pure functions of the thread's state and its run in progress, so the ``view`` query and
the search attributes agree, and both are testable without a server.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from workflows.models import RunRecord, ThreadState, ThreadStatus, ThreadView


def thread_status(thread: ThreadState, run_in_progress: RunRecord | None) -> ThreadStatus:
    """``running`` while a run is in progress, else ``waiting`` on open interrupts or
    ``idle``.

    Args:
        thread: The thread's state.
        run_in_progress: The run the agent works in, if any.
    """
    if run_in_progress is not None:
        return "running"
    return "waiting" if thread.open_interrupts else "idle"


def asked_at(runs: Sequence[RunRecord]) -> datetime | None:
    """When the thread's open interrupts were asked: the end of the last run that paused
    (``None`` for a thread that never did, or whose runs are no longer kept)."""
    return next((run.finished_at for run in reversed(runs) if run.status == "interrupted"), None)


def thread_view(thread: ThreadState, run_in_progress: RunRecord | None) -> ThreadView:
    """The thread as ``GET /threads/{thread_id}`` shows it.

    Args:
        thread: The thread's state.
        run_in_progress: The run the agent works in, if any.
    """
    return ThreadView(
        thread_id=thread.thread_id,
        agent=thread.agent,
        owner=thread.owner,
        status=thread_status(thread, run_in_progress),
        messages=thread.messages,
        state=thread.state,
        interrupts=thread.open_interrupts,
        runs=thread.runs,
        audit=thread.audit,
        memory=thread.memory,
        subagents=thread.subagents,
    )
