"""How the gateway reports failures: a JSON body before a stream starts, a
``RUN_ERROR`` event after.

Every error carries a stable ``code``: the gateway's own below, or the workflow's
:class:`workflows.errors.ErrorCode` passed through unchanged. No message carries another
system's text: a failure the client cannot act on is logged under an error id, and the
client is told the id.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable
from enum import StrEnum
from typing import Any, TypeVar

from ag_ui.core import RunErrorEvent
from fastapi import Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from temporalio.api.enums.v1 import ResourceExhaustedScope
from temporalio.api.errordetails.v1 import ResourceExhaustedFailure, WorkflowNotReadyFailure
from temporalio.client import (
    WorkflowQueryFailedError,
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from workflows.errors import ErrorCode

log = logging.getLogger(__name__)


class GatewayErrorCode(StrEnum):
    """Errors the gateway finds itself, before anything reaches a workflow."""

    MALFORMED_JSON = "MALFORMED_JSON"
    """The body is not UTF-8 JSON, or nests deeper than the gateway parses (400)."""
    INVALID_RUN_INPUT = "INVALID_RUN_INPUT"
    INVALID_DECISION = "INVALID_DECISION"
    """A decision's body is not ``{"status": "resolved"|"cancelled", "payload"?}`` (422)."""
    UNKNOWN_AGENT = "UNKNOWN_AGENT"
    UNKNOWN_THREAD = "UNKNOWN_THREAD"
    UNKNOWN_RUN = "UNKNOWN_RUN"
    INVALID_EVENT_ID = "INVALID_EVENT_ID"
    INVALID_FILTER = "INVALID_FILTER"
    INVALID_CURSOR = "INVALID_CURSOR"
    INVALID_PARAMETER = "INVALID_PARAMETER"
    """A path, query or header parameter outside what the route accepts."""
    TEMPORAL_UNAVAILABLE = "TEMPORAL_UNAVAILABLE"
    """Temporal cannot be reached, or is overloaded (503, with ``Retry-After``)."""
    UNAUTHENTICATED = "UNAUTHENTICATED"
    """No bearer token, or one that does not verify (401, with ``WWW-Authenticate``)."""
    SESSION_EXPIRED = "SESSION_EXPIRED"
    """The inbox page's session cookie is past its end: sign in again (401)."""
    CSRF_FAILED = "CSRF_FAILED"
    """A state-changing request of a session without its ``X-CSRF-Token`` (403)."""
    AUTH_UNAVAILABLE = "AUTH_UNAVAILABLE"
    """The identity provider's keys cannot be fetched, so no token can be checked (503)."""
    BODY_TOO_LARGE = "BODY_TOO_LARGE"
    """The body is larger than ``AGUI_MAX_BODY_BYTES`` (413)."""
    UNSUPPORTED_MEDIA_TYPE = "UNSUPPORTED_MEDIA_TYPE"
    """A body that does not say it is UTF-8 JSON (``Content-Type: application/json``) (415)."""
    INVALID_HOST = "INVALID_HOST"
    """The ``Host`` header names none of ``AGUI_ALLOWED_HOSTS`` (400)."""
    CORS_REJECTED = "CORS_REJECTED"
    """A CORS preflight from an origin not in ``AGUI_CORS_ORIGINS``, or asking for a
    method or header the gateway does not allow (400)."""
    TOO_MANY_REQUESTS = "TOO_MANY_REQUESTS"
    """The principal holds ``AGUI_MAX_STREAMS_PER_PRINCIPAL`` streams already, or Temporal
    rate-limits the namespace or the thread (429, with ``Retry-After``)."""
    INPUT_TOO_LARGE = "INPUT_TOO_LARGE"
    """Temporal refused the run's input, for its size (413)."""
    THREAD_UNAVAILABLE = "THREAD_UNAVAILABLE"
    """The thread's workflow task keeps failing, so nothing can read or run it until a
    worker can process it: most often a payload key (``AGUI_PAYLOAD_KEYS``) the thread
    was encrypted with is missing; the worker's log names it. Or no worker serves it:
    none polls its task queue (or, under Worker Versioning, its build), or none took a
    run or decision within ``AGUI_ACCEPT_SECONDS``. Nothing is lost (503, with
    ``Retry-After``)."""
    UNKNOWN_ROUTE = "UNKNOWN_ROUTE"
    """No endpoint at that path (404)."""
    METHOD_NOT_ALLOWED = "METHOD_NOT_ALLOWED"
    """The path's endpoint does not take that method (405, with ``Allow``)."""
    CODEC_FORBIDDEN = "CODEC_FORBIDDEN"
    """The codec server is for ``AGUI_AUTH_ADMIN_GROUP``'s and ``AGUI_CODEC_GROUP``'s
    members only (403)."""
    INVALID_PAYLOADS = "INVALID_PAYLOADS"
    """A codec request's body is not ``temporal.api.common.v1.Payloads`` in protobuf JSON (400)."""
    UNDECRYPTABLE_PAYLOAD = "UNDECRYPTABLE_PAYLOAD"
    """A payload to decode was encrypted with a key the gateway does not have, or was
    altered; the message names the key id (422)."""
    DAMAGED_PAYLOAD = "DAMAGED_PAYLOAD"
    """A compressed payload to decode does not inflate, or inflates past what any payload
    may hold (422)."""
    INTERNAL = "INTERNAL"
    """Anything the gateway did not expect (500, or a ``RUN_ERROR``): the message carries
    an error id, and the gateway's log the error under it."""


class NotAccepted(Exception):
    """No worker accepted a thread's update (a run, a decision) in time (:func:`accepted`)."""


T = TypeVar("T")


async def accepted(call: Awaitable[T], seconds: float) -> T:
    """The result of ``call``, a Temporal call that returns once a worker has accepted a
    thread's update, if it does within ``seconds`` (``Settings.accept_seconds``).

    Raises:
        NotAccepted: It did not; Temporal still holds the update.
    """
    try:
        return await asyncio.wait_for(call, seconds)
    except (TimeoutError, WorkflowUpdateRPCTimeoutOrCancelledError) as err:
        # The SDK reports its call cancelled at the timeout as the latter.
        raise NotAccepted(f"no worker accepted the update within {seconds} s") from err


TEMPORAL_ERRORS: tuple[type[Exception], ...] = (
    RPCError,
    RuntimeError,
    WorkflowQueryFailedError,
    NotAccepted,
)
"""What a Temporal call raises when the server cannot serve it: an ``RPCError``, a
``RuntimeError`` when a lazily connected client fails to connect at all, a failed query
when the worker cannot serve the thread's read (a payload key missing, say), or
:class:`NotAccepted` when no worker took the thread's update in time."""


RETRY_AFTER_SECONDS = 1
"""What a ``Retry-After`` header says: a client over a cap, or told Temporal is busy or
away, waits this long before it tries again."""

UNREACHABLE = frozenset(
    {RPCStatusCode.UNAVAILABLE, RPCStatusCode.DEADLINE_EXCEEDED, RPCStatusCode.CANCELLED}
)
"""Statuses of a call that did not reach a server (or a worker) able to answer it."""
REFUSED_INPUT = frozenset({RPCStatusCode.INVALID_ARGUMENT, RPCStatusCode.OUT_OF_RANGE})
"""Statuses of a call Temporal refused for what it carried: for a run, its input's
size (the gateway sends nothing else a client controls that Temporal limits)."""
UNKNOWN_SEARCH_ATTRIBUTE = "search attribute"
"""What Temporal's refusals naming a search attribute say (an ``INVALID_ARGUMENT`` with no
detail to tell them apart): a thread's start that sets the engine's, or a listing that
filters by them, before the namespace has them (``worker.ensure_search_attributes``
registers them at start). The values the gateway sets are its own and bounded, so the
refusal is never about a client's input."""
NO_POLLER = "no poller seen for task queue recently"
"""How Temporal refuses a query that no worker of the thread's task queue (under Worker
Versioning: of its build) has polled for lately: a ``FAILED_PRECONDITION`` with no
detail but this message."""
RUN_ERROR_CODES = frozenset(code.value for code in ErrorCode)
"""The workflow's stable codes: a rejection with any other type (a bug's exception,
converted by the SDK) is reported as ``INTERNAL``, without its text."""


class ApiError(Exception):
    """An HTTP error answered as ``{"error": {"code", "message", "details"?}}``."""

    def __init__(
        self,
        status: int,
        code: GatewayErrorCode | ErrorCode,
        message: str,
        details: Any = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details = details
        self.headers = headers

    def response(self) -> JSONResponse:
        """The error as the gateway answers it."""
        body: dict[str, Any] = {"code": self.code.value, "message": self.message}
        if self.details is not None:
            body["details"] = self.details
        return JSONResponse({"error": body}, status_code=self.status, headers=self.headers)


async def api_error_handler(_: Request, exc: Exception) -> JSONResponse:
    """Render an :class:`ApiError` as its JSON body."""
    assert isinstance(exc, ApiError)
    return exc.response()


async def validation_error_handler(_: Request, exc: Exception) -> JSONResponse:
    """FastAPI's own parameter validation, in the gateway's one error body."""
    assert isinstance(exc, RequestValidationError)
    details = jsonable_encoder(exc.errors(), exclude={"ctx", "url"})
    error = ApiError(
        422, GatewayErrorCode.INVALID_PARAMETER, "A parameter is invalid.", details=details
    )
    return error.response()


HTTP_ERRORS = {
    404: (GatewayErrorCode.UNKNOWN_ROUTE, "No endpoint at this path."),
    405: (GatewayErrorCode.METHOD_NOT_ALLOWED, "This endpoint does not take that method."),
}
"""The HTTP errors Starlette's router raises itself, in the gateway's error body."""


async def http_error_handler(request: Request, exc: Exception) -> JSONResponse:
    """An unknown path or method, in the gateway's one error body. The gateway's routes
    raise :class:`ApiError`, never ``HTTPException``: any other status is a bug."""
    assert isinstance(exc, StarletteHTTPException)
    known = HTTP_ERRORS.get(exc.status_code)
    if known is None:
        return internal_error(exc).response()
    code, message = known
    headers = dict(exc.headers) if exc.headers else None
    return ApiError(exc.status_code, code, message, headers=headers).response()


def _logged(err: BaseException, code: GatewayErrorCode, *, traceback: bool) -> str:
    """Log ``err`` under a new error id, which the client is told instead of its text
    (Temporal's and gRPC's messages may name hosts, or carry credentials)."""
    error_id = uuid.uuid4().hex
    log.log(
        logging.ERROR if traceback else logging.WARNING,
        "error %s (%s): %s: %s",
        error_id,
        code.value,
        type(err).__name__,
        err,
        exc_info=err if traceback else None,
        extra={"code": code.value},
    )
    return error_id


def internal_error(err: BaseException) -> ApiError:
    """The 500 for anything the gateway did not expect; the traceback goes to the log."""
    error_id = _logged(err, GatewayErrorCode.INTERNAL, traceback=True)
    return ApiError(
        500,
        GatewayErrorCode.INTERNAL,
        f"The gateway failed unexpectedly (error id {error_id}).",
        details={"errorId": error_id},
    )


def temporal_error(err: Exception, *, sent_input: bool = False) -> ApiError:
    """The HTTP error for a failed Temporal call, told apart by its gRPC status.

    Temporal unreachable (or a worker, for reads) is 503 ``TEMPORAL_UNAVAILABLE``, and so
    is a cluster that says it is overloaded or lacks the engine's search attributes; a
    rate limit of the namespace or the thread (e.g. too many runs in flight on it) is 429
    ``TOO_MANY_REQUESTS``; input Temporal refuses (too large for a payload or a gRPC
    message) is 413 ``INPUT_TOO_LARGE``; anything else is 500 ``INTERNAL``. The client
    gets an error id, the log the error.

    Args:
        err: What the call raised (one of :data:`TEMPORAL_ERRORS`).
        sent_input: The call carried a client's run input, so a refusal is about it.
    """
    known = _classified(err, sent_input)
    if known is None:
        return internal_error(err)
    status, code, message = known
    error_id = _logged(err, code, traceback=False)
    return ApiError(
        status,
        code,
        f"{message} (error id {error_id}).",
        details={"errorId": error_id},
        headers={"Retry-After": str(RETRY_AFTER_SECONDS)} if status in (429, 503) else None,
    )


_UNAVAILABLE = (
    503,
    GatewayErrorCode.TEMPORAL_UNAVAILABLE,
    "Temporal is unavailable; try again later",
)
_RATE_LIMITED = (
    429,
    GatewayErrorCode.TOO_MANY_REQUESTS,
    "Temporal limits requests to this namespace or thread; try again later",
)
_THREAD_UNAVAILABLE = (
    503,
    GatewayErrorCode.THREAD_UNAVAILABLE,
    "The thread cannot be served until a worker can process it (the worker's log says "
    "why); try again later",
)
_NO_WORKER = (
    503,
    GatewayErrorCode.THREAD_UNAVAILABLE,
    "No worker serves the thread now; try again later",
)
_NOT_ACCEPTED = (
    503,
    GatewayErrorCode.THREAD_UNAVAILABLE,
    "No worker took the request in time; send the same request again later",
)
_NOT_SET_UP = (
    503,
    GatewayErrorCode.TEMPORAL_UNAVAILABLE,
    "Temporal is not set up for the engine yet (a worker registers its search attributes "
    "when it starts); try again later",
)
_INPUT_TOO_LARGE = (
    413,
    GatewayErrorCode.INPUT_TOO_LARGE,
    "Temporal refused the run's input as too large; send less (e.g. shorter messages)",
)


def _classified(err: Exception, sent_input: bool) -> tuple[int, GatewayErrorCode, str] | None:
    """What a failed call means for the client; ``None``: nothing it could act on."""
    if isinstance(err, WorkflowQueryFailedError):
        return _THREAD_UNAVAILABLE
    if isinstance(err, NotAccepted):
        return _NOT_ACCEPTED
    if not isinstance(err, RPCError):
        # A lazily connected client that cannot connect raises a RuntimeError.
        return _UNAVAILABLE if isinstance(err, RuntimeError) else None
    if err.status in UNREACHABLE:
        return _UNAVAILABLE
    if err.status == RPCStatusCode.FAILED_PRECONDITION and _workflow_not_ready(err):
        return _THREAD_UNAVAILABLE
    if err.status == RPCStatusCode.FAILED_PRECONDITION and NO_POLLER in err.message:
        return _NO_WORKER
    if err.status == RPCStatusCode.INVALID_ARGUMENT and UNKNOWN_SEARCH_ATTRIBUTE in err.message:
        return _NOT_SET_UP
    if err.status == RPCStatusCode.RESOURCE_EXHAUSTED:
        scope = _exhausted_scope(err)
        if scope == ResourceExhaustedScope.RESOURCE_EXHAUSTED_SCOPE_SYSTEM:
            return _UNAVAILABLE
        if scope is not None:
            return _RATE_LIMITED
        # Without Temporal's detail it is gRPC's own limit, on a message's size.
        return _INPUT_TOO_LARGE if sent_input else None
    return _INPUT_TOO_LARGE if sent_input and err.status in REFUSED_INPUT else None


def _exhausted_scope(err: RPCError) -> int | None:
    """The scope of Temporal's ``ResourceExhaustedFailure`` in the error's details, or
    ``None`` when there is none (a limit of gRPC's own, not a rate limit)."""
    for detail in err.grpc_status.details:
        failure = ResourceExhaustedFailure()
        if detail.Unpack(failure):
            return int(failure.scope)
    return None


def _workflow_not_ready(err: RPCError) -> bool:
    """Whether Temporal refused a query or an update because the workflow's task is
    failing (its ``WorkflowNotReadyFailure``), which a worker retries."""
    return any(detail.Is(WorkflowNotReadyFailure.DESCRIPTOR) for detail in err.grpc_status.details)


def unknown_thread(thread_id: str) -> ApiError:
    """The 404 for a thread that does not exist, or that the caller may not see: the
    two are told apart by nothing."""
    return ApiError(404, GatewayErrorCode.UNKNOWN_THREAD, f"No thread {thread_id!r}.")


def thread_read_error(thread_id: str, err: Exception) -> ApiError:
    """A failed read of a thread: 404 when it does not exist, else as
    :func:`temporal_error` says."""
    if isinstance(err, RPCError) and err.status == RPCStatusCode.NOT_FOUND:
        return unknown_thread(thread_id)
    return temporal_error(err)


DECISION_REJECTIONS = {
    ErrorCode.NOT_AN_APPROVER: 403,
    ErrorCode.UNKNOWN_THREAD: 404,
    ErrorCode.UNKNOWN_INTERRUPT: 404,
    ErrorCode.UNKNOWN_AGENT: 404,
    ErrorCode.INTERRUPT_EXPIRED: 409,
    ErrorCode.INTERRUPT_ALREADY_ANSWERED: 409,
    ErrorCode.INPUT_TOO_LARGE: 413,
    ErrorCode.MISSING_PAYLOAD: 422,
    ErrorCode.INVALID_PAYLOAD: 422,
    ErrorCode.POLICY_EXCEEDED: 422,
}
"""The HTTP status of each way a thread rejects a decision; any other is a bug (500)."""


def decision_rejection(err: WorkflowUpdateFailedError) -> ApiError:
    """The HTTP error for a decision the thread rejected: its code and message kept,
    answered with the code's status (``DECISION_REJECTIONS``), else ``INTERNAL``."""
    cause = err.cause
    if isinstance(cause, ApplicationError) and cause.type in DECISION_REJECTIONS:
        code = ErrorCode(cause.type)
        return ApiError(DECISION_REJECTIONS[code], code, cause.message)
    return internal_error(cause or err)


def run_error_from(err: Exception) -> RunErrorEvent:
    """The ``RUN_ERROR`` event for a failure met while starting or streaming a run.

    A run rejected by the thread workflow keeps the workflow's stable code and message;
    anything else is reported as :func:`temporal_error` would answer it, by code and a
    message with an error id, never its text.
    """
    if isinstance(err, WorkflowUpdateFailedError):
        cause = err.cause
        if isinstance(cause, ApplicationError) and cause.type in RUN_ERROR_CODES:
            return RunErrorEvent(message=cause.message, code=cause.type)
        error = internal_error(cause or err)
    else:
        error = temporal_error(err)
    return RunErrorEvent(message=error.message, code=error.code.value)
