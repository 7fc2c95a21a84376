"""What a client is told of agent code that failed: a run's, or a sub-agent's.

Shared by the thread (``workflows/thread.py``) and its sub-agents
(``workflows/subagent.py``), so an error reads the same wherever the agent ran.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from workflows.errors import ErrorCode


RUN_FAULTS = frozenset(
    {
        ErrorCode.TOO_MANY_INTERRUPTS,
        ErrorCode.INVALID_QUESTION,
        ErrorCode.OUTPUT_TOO_LARGE,
        ErrorCode.PERMIT_MISMATCH,
    }
)
"""Codes a turn's error keeps as the run's: a budget the agent went over, wherever it was
found (the thread, the SDK, a tool's activity asking a question), or a tool that refused
to run on arguments its permit does not bind."""


def failure(error: BaseException) -> tuple[str, str]:
    """The code and message the client is told of a turn that raised ``error``.

    A budget the turn went over keeps its code (``RUN_FAULTS``). A model or tool that
    kept failing, or agent code giving up on purpose (``ApplicationError``), says why.
    Anything else is a bug in agent code: it ends the run instead of failing the
    workflow task, which Temporal would retry forever with the thread stuck; its details
    go to the worker's log, not to the client.
    """
    cause = error.cause if isinstance(error, ActivityError) else error
    if isinstance(cause, ApplicationError) and cause.type in RUN_FAULTS:
        return cause.type, cause.message
    if isinstance(error, ActivityError):
        return ErrorCode.AGENT_FAILED, f"The agent failed: {error.cause or error}"
    if isinstance(error, ApplicationError):
        return ErrorCode.AGENT_FAILED, f"The agent failed: {error}"
    workflow.logger.error("agent code raised", exc_info=error)
    return (
        ErrorCode.AGENT_FAILED,
        "The agent failed: its code raised an error (see the worker's log).",
    )
