"""What every request passes before it reaches a route: the ``Host`` allow-list, CORS
(the gateway's, and the codec server's own), the cap on the body's size, and the net
that turns any unexpected exception into a 500 in the gateway's error body.

Pure ASGI middleware, so event streams pass through untouched.
"""

from __future__ import annotations

from collections.abc import Iterable

from starlette.datastructures import Headers
from starlette.middleware.cors import CORSMiddleware
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway.errors import ApiError, GatewayErrorCode, internal_error

UNCHECKED_HOST_PATHS = frozenset({"/healthz"})
"""Paths any ``Host`` may ask for: probes call ``/healthz`` by the pod's address."""
CORS_HEADERS = ("Authorization", "Content-Type", "Last-Event-ID")
"""The request headers a browser page may send: a token, a JSON body, a resume point."""
CORS_EXPOSED = ("Retry-After", "WWW-Authenticate")
"""Response headers a browser page may read beyond the safelisted ones."""
CODEC_PREFIX = "/codec"
"""Where the codec server is (``gateway.codec``)."""
CODEC_CORS_HEADERS = ("Authorization", "Content-Type", "X-Namespace")
"""The request headers the Temporal Web UI sends the codec server."""


class InternalErrors:
    """Any exception a route did not turn into an answer becomes a 500 ``INTERNAL``
    whose message has an error id; the traceback is logged once, under that id.

    Starlette's own handler for ``Exception`` re-raises after answering, so the server
    would log the traceback a second time, without the id.
    """

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        started = False

        async def sending(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self._app(scope, receive, sending)
        except Exception as exc:
            error = internal_error(exc)
            # Once a response has started, all that is left is to end it: the server
            # closes the connection of a response the app did not complete.
            if not started:
                await error.response()(scope, receive, send)


class AllowedHosts:
    """Requests whose ``Host`` is not one of ``hosts`` are a 400 ``INVALID_HOST``
    (``/healthz`` excepted), so a DNS-rebinding page cannot reach the gateway under a
    name of its own.

    Args:
        app: The app behind.
        hosts: Host names, compared case-insensitively and without the port.
    """

    def __init__(self, app: ASGIApp, hosts: Iterable[str]) -> None:
        self._app = app
        self._hosts = frozenset(host.lower().rstrip(".") for host in hosts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in UNCHECKED_HOST_PATHS:
            await self._app(scope, receive, send)
            return
        if host_name(Headers(scope=scope).get("host", "")) in self._hosts:
            await self._app(scope, receive, send)
            return
        error = ApiError(
            400, GatewayErrorCode.INVALID_HOST, "The Host header names no host this gateway serves."
        )
        await error.response()(scope, receive, send)


def host_name(host: str) -> str:
    """A ``Host`` header's name: lower case, without its port or a trailing dot."""
    name = host[: host.find("]") + 1] if host.startswith("[") else host.rsplit(":", 1)[0]
    return name.lower().rstrip(".")


class Cors(CORSMiddleware):
    """Starlette's CORS, for the origins listed, with a rejected preflight answered in
    the gateway's error body (``CORS_REJECTED``) instead of plain text. The codec
    server's paths are left to :class:`CodecCors`, whose origins and rules are its own."""

    def __init__(self, app: ASGIApp, origins: Iterable[str]) -> None:
        super().__init__(
            app,
            allow_origins=list(origins),
            # DELETE: a thread's owner erases it (``DELETE /threads/{threadId}``).
            allow_methods=["GET", "POST", "DELETE"],
            allow_headers=list(CORS_HEADERS),
            expose_headers=list(CORS_EXPOSED),
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and codec_path(scope["path"]):
            await self.app(scope, receive, send)
            return
        await super().__call__(scope, receive, send)

    def preflight_response(self, request_headers: Headers) -> Response:
        return _in_error_body(super().preflight_response(request_headers))


class CodecCors(CORSMiddleware):
    """CORS for the codec server alone (``/codec/...``), for the Temporal Web UI's
    origins (``AGUI_CODEC_ORIGINS``): the UI's page posts payloads there from its own
    origin, with a token or, when it includes credentials, the inbox session cookie."""

    def __init__(self, app: ASGIApp, origins: Iterable[str]) -> None:
        super().__init__(
            app,
            allow_origins=list(origins),
            allow_methods=["POST"],
            allow_headers=list(CODEC_CORS_HEADERS),
            allow_credentials=True,
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and codec_path(scope["path"]):
            await super().__call__(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def preflight_response(self, request_headers: Headers) -> Response:
        return _in_error_body(super().preflight_response(request_headers))


def codec_path(path: str) -> bool:
    """Whether ``path`` is the codec server's (``gateway.codec``)."""
    return path.startswith(CODEC_PREFIX + "/")


def _in_error_body(response: Response) -> Response:
    """A preflight's answer; a rejected one in the gateway's error body."""
    if response.status_code == 200:
        return response
    headers = {
        name: value
        for name, value in response.headers.items()
        if name not in ("content-length", "content-type")
    }
    # Starlette's text names what failed: "Disallowed CORS origin, headers".
    message = bytes(response.body).decode()
    error = ApiError(400, GatewayErrorCode.CORS_REJECTED, f"{message}.", headers=headers)
    return error.response()


class BodyLimit:
    """Bodies larger than ``max_bytes`` are a 413 ``BODY_TOO_LARGE``, read no further.

    A declared ``Content-Length`` over the cap is answered at once, before the token is
    checked; a body without one (chunked) is counted as the route reads it, which stops
    the first time the count passes the cap: at most the cap and one network read are
    ever held.

    Args:
        app: The app behind.
        max_bytes: The largest body read.
    """

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self._app = app
        self._max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        declared = Headers(scope=scope).get("content-length", "")
        if declared.isascii() and declared.isdigit() and int(declared) > self._max_bytes:
            await self._too_large().response()(scope, receive, send)
            return
        received = 0

        async def counting() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self._max_bytes:
                    # Raised into the route reading the body; its handler answers.
                    raise self._too_large()
            return message

        await self._app(scope, counting, send)

    def _too_large(self) -> ApiError:
        return ApiError(
            413,
            GatewayErrorCode.BODY_TOO_LARGE,
            f"The body is larger than this gateway's limit of {self._max_bytes} bytes.",
        )
