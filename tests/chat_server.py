"""A local OpenAI-compatible chat-completions server speaking the real wire format.

``POST /v1/chat/completions`` with ``stream: true`` answers with server-sent
``chat.completion.chunk`` objects (text deltas, tool-call deltas with an id and name
first, then argument pieces), a ``finish_reason`` chunk and ``data: [DONE]``, as
OpenAI's API does. Replies are scripted per test; the server can hold a reply midway,
so a test can observe what reached the client while the "model" is still generating.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

HOLD_LIMIT_SECONDS = 60.0
"""A held reply goes on after this long even if the test never releases it."""


@dataclass(frozen=True)
class ScriptedCall:
    """A tool call to stream: its name, then its JSON arguments in ``pieces`` parts."""

    name: str
    arguments: dict[str, Any]
    pieces: int = 3


@dataclass
class Reply:
    """One completion: text deltas, then tool calls; ``hold_after`` chunks, then wait."""

    text: list[str] = field(default_factory=list)
    tool_calls: list[ScriptedCall] = field(default_factory=list)
    hold_after: int | None = None
    interval_seconds: float = 0.0
    """Pause between chunks, as a model generating tokens would (bench)."""
    first_chunk_seconds: float = 0.0
    """Pause before the first chunk, as a model thinking before it writes (bench)."""
    error_after: int | None = None
    """Break off after this many chunks with an error event, as an overloaded server does."""
    status: int = 200
    """Anything else: answer with this status and an error body, streaming nothing."""


class ChatServer:
    """Serves scripted replies in order (then ``ok``), recording each request's body and
    when each chunk left (for latency measurement)."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.sent: list[tuple[float, str]] = []
        """``(time.time(), text delta)`` for each text chunk as it was flushed."""
        self._replies: list[Reply] = []
        self._released = threading.Event()
        self._holding = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def script(self, *replies: Reply) -> None:
        self._replies.extend(replies)

    @property
    def holding(self) -> bool:
        """Whether a reply is held midway right now."""
        return self._holding.is_set()

    def release(self) -> None:
        self._released.set()

    @contextmanager
    def serving(self) -> Iterator[ChatServer]:
        thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._released.set()
            self._server.shutdown()
            self._server.server_close()
            thread.join()

    def _next(self) -> Reply:
        return self._replies.pop(0) if self._replies else Reply(text=["ok"])

    def _chunks(self, reply: Reply) -> Iterator[tuple[dict[str, Any], str]]:
        """``(delta, text)`` pairs: the chunks' deltas, and the text each carries."""
        for text in reply.text:
            yield {"content": text}, text
        for index, call in enumerate(reply.tool_calls):
            head = {"index": index, "id": f"call_{index}", "type": "function"}
            yield {"tool_calls": [{**head, "function": {"name": call.name, "arguments": ""}}]}, ""
            arguments = json.dumps(call.arguments)
            size = -(-len(arguments) // call.pieces)
            for start in range(0, len(arguments), size):
                piece = {"index": index, "function": {"arguments": arguments[start : start + size]}}
                yield {"tool_calls": [piece]}, ""

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append(body)
                reply = server._next()
                if reply.status != 200:
                    failure = json.dumps(
                        {"error": {"message": "unavailable", "type": "server_error"}}
                    ).encode()
                    self.send_response(reply.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(failure)))
                    self.end_headers()
                    self.wfile.write(failure)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                finish = "tool_calls" if reply.tool_calls else "stop"
                for count, (delta, text) in enumerate(server._chunks(reply)):
                    if count == reply.hold_after:
                        server._holding.set()
                        server._released.wait(HOLD_LIMIT_SECONDS)
                        server._holding.clear()
                        server._released.clear()
                    if count == reply.error_after:
                        broken = {"error": {"message": "overloaded", "type": "server_error"}}
                        self.wfile.write(f"data: {json.dumps(broken)}\n\n".encode())
                        self.wfile.flush()
                        return
                    pause = reply.interval_seconds if count else reply.first_chunk_seconds
                    if pause:
                        time.sleep(pause)  # sleep-ok: pacing tokens
                    self._send(body["model"], {"role": "assistant", **delta}, None)
                    if text:
                        server.sent.append((time.time(), text))
                self._send(body["model"], {}, finish)
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()

            def _send(self, model: str, delta: dict[str, Any], finish: str | None) -> None:
                chunk = {
                    "id": "chatcmpl-local",
                    "object": "chat.completion.chunk",
                    "created": int(time.time()),
                    "model": model,
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
                }
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.flush()

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet: tests read ``requests`` instead."""

        return Handler
