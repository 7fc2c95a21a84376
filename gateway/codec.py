"""The codec server: Temporal's remote data encoding protocol over the engine's payload
codec (``codec.py``), so the Temporal Web UI and the ``temporal`` CLI show what threads
store in Temporal, encrypted there, as plain JSON.

``POST /codec/decode`` and ``POST /codec/encode`` take and answer
``temporal.api.common.v1.Payloads`` in protobuf JSON (``{"payloads": [{"metadata":
{...}, "data": "<base64>"}]}``); the ``X-Namespace`` header Temporal's clients send is
not needed, since a deployment's keys serve every namespace. A decoded payload is a
thread's plaintext, so only admins (``AGUI_AUTH_ADMIN_GROUP``) and members of
``AGUI_CODEC_GROUP`` may call it, with a bearer token or the inbox page's session cookie
(no CSRF token: these POSTs change nothing, and a page of another origin cannot read
their answer unless ``AGUI_CODEC_ORIGINS`` lists it). Without keys configured, payloads
are only inflated where they were compressed.

``POST /codec/token/<JWT>/decode`` (and ``/encode``) is the same, authenticated by the
token in its path, verified exactly as a bearer token: for a client that cannot send a
header, such as the Web UI ``temporal server start-dev`` embeds, which ``make run``
points at such an address (``docs/operations.md``, "The codec server and the Web UI").
The gateway's access log never shows that token (:class:`RedactCodecTokens`).
Payloads are never logged.
"""

from __future__ import annotations

import logging
import re
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from google.protobuf import json_format
from temporalio.api.common.v1 import Payloads
from temporalio.converter import PayloadCodec

import codec
from gateway.auth import Authenticator, Principal
from gateway.deps import ReadingPrincipalDep, SettingsDep
from gateway.edge import CODEC_PREFIX
from gateway.errors import ApiError, GatewayErrorCode
from gateway.limits import json_body
from settings import Settings

router = APIRouter(prefix=CODEC_PREFIX, tags=["codec"])

Operation = Literal["encode", "decode"]
"""The protocol's two calls: only the path's last segment tells them apart."""
ACCESS_LOGGER = "uvicorn.access"
TOKEN_IN_PATH = re.compile(rf"({re.escape(CODEC_PREFIX)}/token/)[^/?#\s]+")
REDACTED = "[redacted]"


def may_use_codec(principal: Principal, settings: Settings) -> bool:
    """Whether ``principal`` may decode (and encode) payloads: an admin, or a member of
    the codec group."""
    group = settings.codec_group
    return principal.admin or (group is not None and group in principal.groups)


@router.post("/{operation}")
async def with_credentials(
    operation: Operation, request: Request, principal: ReadingPrincipalDep, settings: SettingsDep
) -> JSONResponse:
    """Encode or decode payloads, for a bearer token's or a session's principal."""
    return await _serve(operation, request, principal, settings)


async def _path_principal(request: Request, token: str) -> Principal:
    # A dependency, so the token is checked before anything else, as a bearer token is.
    auth: Authenticator = request.app.state.auth
    return await auth.principal(token)


@router.post("/token/{token}/{operation}")
async def with_token_in_path(
    operation: Operation,
    request: Request,
    principal: Annotated[Principal, Depends(_path_principal)],
    settings: SettingsDep,
) -> JSONResponse:
    """Encode or decode payloads, for the principal of the token in the path."""
    return await _serve(operation, request, principal, settings)


async def _serve(
    operation: Operation, request: Request, principal: Principal, settings: Settings
) -> JSONResponse:
    if not may_use_codec(principal, settings):
        raise ApiError(
            403,
            GatewayErrorCode.CODEC_FORBIDDEN,
            "The codec server is for the admin group's and the codec group's members only.",
        )
    payloads = _payloads(await json_body(request))
    payload_codec: PayloadCodec = request.app.state.payload_codec
    try:
        if operation == "decode":
            payloads = await payload_codec.decode(payloads)
        else:
            payloads = await payload_codec.encode(payloads)
    except codec.UndecryptablePayload as error:
        # Its message names the key id, never the data.
        raise ApiError(422, GatewayErrorCode.UNDECRYPTABLE_PAYLOAD, f"A {error}.") from None
    except codec.DamagedPayload as error:
        raise ApiError(422, GatewayErrorCode.DAMAGED_PAYLOAD, f"A {error}.") from None
    # Built by hand: protobuf's JSON leaves out an empty list, the protocol has it.
    return JSONResponse({"payloads": [json_format.MessageToDict(p) for p in payloads]})


def _payloads(body: Any) -> list[Any]:
    """The payloads of a request's JSON body, or a 400 that quotes none of it."""
    message = Payloads()
    try:
        json_format.ParseDict(body, message)
    except (json_format.ParseError, TypeError, ValueError):
        raise ApiError(
            400,
            GatewayErrorCode.INVALID_PAYLOADS,
            'The body must be temporal.api.common.v1.Payloads in protobuf JSON: {"payloads": '
            '[{"metadata": {"encoding": "<base64>"}, "data": "<base64>"}]}.',
        ) from None
    return list(message.payloads)


class RedactCodecTokens(logging.Filter):
    """Replaces the token of a ``/codec/token/<JWT>/...`` path in a log record (uvicorn's
    access log line) with ``[redacted]``: a bearer credential must not reach the logs."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str):
            record.msg = _redacted(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(
                _redacted(arg) if isinstance(arg, str) else arg for arg in record.args
            )
        return True


def _redacted(text: str) -> str:
    return TOKEN_IN_PATH.sub(rf"\g<1>{REDACTED}", text)


def redact_access_log() -> None:
    """Put :class:`RedactCodecTokens` on uvicorn's access logger, once per process."""
    access = logging.getLogger(ACCESS_LOGGER)
    if not any(isinstance(existing, RedactCodecTokens) for existing in access.filters):
        access.addFilter(RedactCodecTokens())
