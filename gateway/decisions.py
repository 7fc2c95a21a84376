"""Decisions from anywhere: ``POST /threads/{thread_id}/interrupts/{interrupt_id}/decisions``,
where an interrupt's approvers (not only the thread's owner) settle it.

The thread decides who may decide (``workflows/decisions.py``); the gateway passes it
the authenticated principal and their groups, and maps a rejection to its HTTP status.
"""

from __future__ import annotations

import json
import logging
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, ConfigDict, ValidationError
from temporalio.client import WorkflowUpdateFailedError, WorkflowUpdateStage
from temporalio.service import RPCError, RPCStatusCode

from gateway.auth import Principal
from gateway.deps import (
    AUTHENTICATED,
    ClientDep,
    InterruptIdPath,
    PrincipalDep,
    SettingsDep,
    ThreadIdPath,
)
from gateway.errors import (
    TEMPORAL_ERRORS,
    ApiError,
    GatewayErrorCode,
    accepted,
    decision_rejection,
    temporal_error,
    unknown_thread,
)
from gateway.limits import json_body

# A body is JSON by the same rule as a run's (and a page on another site may not send it).
from gateway.streaming import thread_handle
from workflows.models import DecisionRequest, DecisionResult, DecisionStatus
from workflows.thread import ThreadWorkflow

audit_log = logging.getLogger("gateway.audit")
"""Decisions the gateway saw rejected: who, on which interrupt, why (never the payload)."""

router = APIRouter(dependencies=AUTHENTICATED)


class DecisionBody(BaseModel):
    """A decision as a client sends it. ``payload`` is the answer, for ``resolved``,
    checked by the thread against the interrupt's ``responseSchema``."""

    model_config = ConfigDict(extra="forbid")

    status: DecisionStatus
    payload: Any = None


async def _decision_body(request: Request) -> DecisionBody:
    """The request body as a :class:`DecisionBody`, or a 4xx saying what is wrong."""
    body: Any = await json_body(request)
    try:
        return DecisionBody.model_validate(body)
    except ValidationError as err:
        raise ApiError(
            422,
            GatewayErrorCode.INVALID_DECISION,
            'The body is not a decision: {"status": "resolved" or "cancelled", "payload": ...}.',
            details=json.loads(err.json(include_url=False, include_context=False)),
        ) from err


DecisionBodyDep = Annotated[DecisionBody, Depends(_decision_body)]


@router.post(
    "/threads/{thread_id}/interrupts/{interrupt_id}/decisions",
    response_model_exclude_none=True,
    # The route reads its body itself (for its own 400, 415 and 422); described here.
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": DecisionBody.model_json_schema()}},
        }
    },
)
async def decide(
    thread_id: ThreadIdPath,
    interrupt_id: InterruptIdPath,
    body: DecisionBodyDep,
    principal: PrincipalDep,
    client: ClientDep,
    settings: SettingsDep,
) -> DecisionResult:
    """Decide an open interrupt as one of its approvers (the thread's owner may always
    cancel their own). Answers once the decision is counted: ``settled`` (with the
    ``runId`` the agent continues in, when it was the thread's last open interrupt),
    ``pending`` (more approvals needed) or ``repeated`` (it had counted already)."""
    request = DecisionRequest(
        interrupt_id=interrupt_id,
        principal=principal.subject,
        groups=sorted(principal.groups),
        status=body.status,
        payload=body.payload,
    )
    try:
        update = thread_handle(client, thread_id).start_update(
            ThreadWorkflow.decide, request, wait_for_stage=WorkflowUpdateStage.ACCEPTED
        )
        return await (await accepted(update, settings.accept_seconds)).result()
    except WorkflowUpdateFailedError as err:
        error = decision_rejection(err)
        _log_rejected(principal, thread_id, interrupt_id, error.code)
        raise error from err
    except RPCError as err:
        if err.status != RPCStatusCode.NOT_FOUND:
            raise temporal_error(err, sent_input=True) from err
        _log_rejected(principal, thread_id, interrupt_id, GatewayErrorCode.UNKNOWN_THREAD)
        raise unknown_thread(thread_id) from err
    except TEMPORAL_ERRORS as err:
        raise temporal_error(err, sent_input=True) from err


def _log_rejected(principal: Principal, thread_id: str, interrupt_id: str, code: str) -> None:
    audit_log.warning(
        "decision rejected: %s on thread %s, interrupt %s: %s",
        principal.subject,
        thread_id,
        interrupt_id,
        code,
        extra={"thread_id": thread_id, "code": str(code)},
    )
