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

    UNKNOWN_THREAD = "UNKNOWN_THREAD"
    """No such thread, as far as the caller may know: it belongs to someone else."""
    THREAD_MISMATCH = "THREAD_MISMATCH"
    """The input's ``threadId`` is not the thread the request was routed to."""
    AGENT_MISMATCH = "AGENT_MISMATCH"
    """The thread belongs to another agent than the one named in the URL."""
    UNKNOWN_AGENT = "UNKNOWN_AGENT"
    """The worker does not serve the thread's agent: the gateway's code for an agent it
    does not serve, as the workflow's validator meets it (``workflows/served.py``)."""
    INVALID_STATE = "INVALID_STATE"
    """The input's ``state`` is not a JSON object, or not one the agent accepts; the
    message names the path."""
    INTERRUPTS_PENDING = "INTERRUPTS_PENDING"
    """Input without a resume while the thread waits on interrupts (rule 4)."""
    UNKNOWN_INTERRUPT = "UNKNOWN_INTERRUPT"
    """A resume entry names no interrupt of this thread (rule 2)."""
    DUPLICATE_RESUME_ENTRY = "DUPLICATE_RESUME_ENTRY"
    """Two resume entries answer the same interrupt."""
    INCOMPLETE_RESUME = "INCOMPLETE_RESUME"
    """The resume leaves an open interrupt unanswered (rule 3)."""
    INTERRUPT_ALREADY_ANSWERED = "INTERRUPT_ALREADY_ANSWERED"
    """A resume answers an interrupt that was already answered, differently (rule 5)."""
    INTERRUPT_EXPIRED = "INTERRUPT_EXPIRED"
    """A ``resolved`` entry for an interrupt past its ``expiresAt`` (rule 7)."""
    MISSING_PAYLOAD = "MISSING_PAYLOAD"
    """A ``resolved`` entry without the payload its interrupt's schema asks for (rule 8)."""
    INVALID_PAYLOAD = "INVALID_PAYLOAD"
    """A payload that fails its interrupt's ``responseSchema``; the message names the path
    (rule 6)."""
    EMPTY_RESUME = "EMPTY_RESUME"
    """An ``operator_resume`` without entries."""
    AGENT_FAILED = "AGENT_FAILED"
    """The agent's model or a tool failed after its retries; the thread stays usable."""
    INVALID_FORWARDED_PROPS = "INVALID_FORWARDED_PROPS"
    """The input's ``forwardedProps`` are not what the agent accepts; the message names
    the path."""
    MESSAGE_NOT_ALLOWED = "MESSAGE_NOT_ALLOWED"
    """A new message a client may not add: a role the agent does not take from clients,
    or a ``tool`` message that answers no unanswered call of a tool the client provides."""
    INPUT_TOO_LARGE = "INPUT_TOO_LARGE"
    """The run's input is over a budget (``workflows/budgets.py``): too many messages, a
    message, the resume or the whole input too large, or state that would grow too large."""
    TOO_MANY_INTERRUPTS = "TOO_MANY_INTERRUPTS"
    """The agent asked more questions in one run than a run may open; none was opened."""
    INVALID_QUESTION = "INVALID_QUESTION"
    """The agent asked a question the thread cannot open: it expires too far ahead (or
    never could), has too many reminders, or is too large; none was opened."""
    OUTPUT_TOO_LARGE = "OUTPUT_TOO_LARGE"
    """The agent's output in the run went over a budget: its events, a message, or what
    it left in the thread's state, memory or paused turn."""
    NOT_AN_APPROVER = "NOT_AN_APPROVER"
    """The decider may not settle this interrupt: not among its approvers (or excluded as
    the requester), or, in the owner's resume, one approval does not settle it."""
    POLICY_EXCEEDED = "POLICY_EXCEEDED"
    """An approval's ``editedArgs`` would need a stricter approver policy than the one
    the interrupt asks under; nothing was counted."""
    PERMIT_MISMATCH = "PERMIT_MISMATCH"
    """A tool was about to run on arguments other than those its approval's permit
    binds; it did not run."""
    INTERNAL = "INTERNAL"
    """The thread itself failed to serve the run (a bug in the engine); the run ended,
    the thread stays usable."""


def rejection(code: ErrorCode, message: str) -> ApplicationError:
    """An error that rejects a run: non-retryable, typed with the stable code."""
    return ApplicationError(message, type=code.value, non_retryable=True)
