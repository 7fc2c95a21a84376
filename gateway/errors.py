"""How the gateway reports failures: a JSON body before a stream starts, a
``RUN_ERROR`` event after.

Every error carries a stable ``code``: the gateway's own below, or the workflow's
:class:`workflows.errors.ErrorCode` passed through unchanged.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from ag_ui.core import RunErrorEvent
from fastapi import Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from temporalio.client import WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode


class GatewayErrorCode(StrEnum):
    """Errors the gateway finds itself, before anything reaches a workflow."""

    MALFORMED_JSON = "MALFORMED_JSON"
    INVALID_RUN_INPUT = "INVALID_RUN_INPUT"
    UNKNOWN_AGENT = "UNKNOWN_AGENT"
    UNKNOWN_THREAD = "UNKNOWN_THREAD"
    UNKNOWN_RUN = "UNKNOWN_RUN"
    INVALID_EVENT_ID = "INVALID_EVENT_ID"
    INVALID_FILTER = "INVALID_FILTER"
    INVALID_CURSOR = "INVALID_CURSOR"
    INVALID_PARAMETER = "INVALID_PARAMETER"
    """A path, query or header parameter outside what the route accepts."""
    TEMPORAL_UNAVAILABLE = "TEMPORAL_UNAVAILABLE"
    UNAUTHENTICATED = "UNAUTHENTICATED"
    """No bearer token, or one that does not verify (401, with ``WWW-Authenticate``)."""
    AUTH_UNAVAILABLE = "AUTH_UNAVAILABLE"
    """The identity provider's keys cannot be fetched, so no token can be checked (503)."""


TEMPORAL_ERRORS: tuple[type[Exception], ...] = (RPCError, RuntimeError)
"""What a Temporal call raises when the server cannot serve it: an ``RPCError``, or a
``RuntimeError`` when a lazily connected client fails to connect at all."""


RUN_FAILURES: tuple[type[Exception], ...] = (WorkflowUpdateFailedError, *TEMPORAL_ERRORS)
"""What can end a run's stream early: the thread rejected it, or Temporal is unreachable."""


class ApiError(Exception):
    """An HTTP error answered as ``{"error": {"code", "message", "details"?}}``."""

    def __init__(
        self,
        status: int,
        code: GatewayErrorCode,
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


async def api_error_handler(_: Request, exc: Exception) -> JSONResponse:
    """Render an :class:`ApiError` as its JSON body."""
    assert isinstance(exc, ApiError)
    body: dict[str, Any] = {"code": exc.code.value, "message": exc.message}
    if exc.details is not None:
        body["details"] = exc.details
    return JSONResponse({"error": body}, status_code=exc.status, headers=exc.headers)


async def validation_error_handler(_: Request, exc: Exception) -> JSONResponse:
    """FastAPI's own parameter validation, in the gateway's one error body."""
    assert isinstance(exc, RequestValidationError)
    details = jsonable_encoder(exc.errors(), exclude={"ctx", "url"})
    error = ApiError(
        422, GatewayErrorCode.INVALID_PARAMETER, "A parameter is invalid.", details=details
    )
    return await api_error_handler(_, error)


def temporal_unavailable(err: Exception) -> ApiError:
    """The 503 answered when Temporal cannot be reached."""
    return ApiError(503, GatewayErrorCode.TEMPORAL_UNAVAILABLE, f"Temporal is unavailable: {err}")


def unknown_thread(thread_id: str) -> ApiError:
    """The 404 for a thread that does not exist, or that the caller may not see: the
    two are told apart by nothing."""
    return ApiError(404, GatewayErrorCode.UNKNOWN_THREAD, f"No thread {thread_id!r}.")


def thread_read_error(thread_id: str, err: Exception) -> ApiError:
    """A failed read of a thread: 404 when it does not exist, else Temporal is unavailable."""
    if isinstance(err, RPCError) and err.status == RPCStatusCode.NOT_FOUND:
        return unknown_thread(thread_id)
    return temporal_unavailable(err)


def run_error_from(err: BaseException) -> RunErrorEvent:
    """The ``RUN_ERROR`` event for a failure met while starting or streaming a run.

    A run rejected by the thread workflow keeps the workflow's stable code; anything
    else means Temporal could not be reached.
    """
    if isinstance(err, WorkflowUpdateFailedError) and isinstance(err.cause, ApplicationError):
        code = err.cause.type or "RUN_REJECTED"
        return RunErrorEvent(message=err.cause.message, code=code)
    return RunErrorEvent(
        message=f"Temporal is unavailable: {err}",
        code=GatewayErrorCode.TEMPORAL_UNAVAILABLE.value,
    )
