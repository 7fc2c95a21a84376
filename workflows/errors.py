"""Stable error codes: the ``code`` of a ``RUN_ERROR`` and the ``type`` of the
``ApplicationError`` that carries it out of the workflow.

Clients switch on these strings, so they never change once published; the README lists
them with their meaning.
"""

from __future__ import annotations

from enum import StrEnum

from temporalio.exceptions import ApplicationError


class ErrorCode(StrEnum):
    """Why a run was rejected or failed."""

    THREAD_MISMATCH = "THREAD_MISMATCH"
    """The input's ``threadId`` is not the thread the request was routed to."""
    AGENT_MISMATCH = "AGENT_MISMATCH"
    """The thread belongs to another agent than the one named in the URL."""
    INVALID_STATE = "INVALID_STATE"
    """The input's ``state`` is not a JSON object."""
    AGENT_FAILED = "AGENT_FAILED"
    """The agent's model or a tool failed after its retries; the thread stays usable."""


def rejection(code: ErrorCode, message: str) -> ApplicationError:
    """An error that rejects a run: non-retryable, typed with the stable code."""
    return ApplicationError(message, type=code.value, non_retryable=True)
