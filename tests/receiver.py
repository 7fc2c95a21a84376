"""A real HTTP endpoint for what the engine posts out: reminders, the demo's emails,
OTLP traces."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from activities.webhooks import IDEMPOTENCY_HEADER
from tests.helpers import eventually

HOLD_LIMIT_SECONDS = 60.0
"""A held request is answered after this long even if the test never releases it."""


@dataclass(frozen=True)
class Delivery:
    """One POST as the receiver got it."""

    path: str
    idempotency_key: str | None
    body: Any
    """Decoded JSON, or the raw bytes of any other content type (OTLP's protobuf)."""


class Receiver:
    """Records every JSON POST; can answer 503 for a while, or hold requests unanswered.

    It serves on a thread of its own, so a held request blocks nothing in the test.
    """

    def __init__(self) -> None:
        self.deliveries: list[Delivery] = []
        self._failures_left = 0
        self._released = threading.Event()
        self._released.set()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def url(self) -> str:
        return f"{self.base_url}/hook"

    def fail_next(self, count: int) -> None:
        """Answer the next ``count`` requests with 503 (after recording them)."""
        self._failures_left = count

    def hold(self) -> None:
        """Leave requests unanswered (after recording them) until :meth:`release`."""
        self._released.clear()

    def release(self) -> None:
        self._released.set()

    def keys(self) -> set[str | None]:
        """The distinct idempotency keys received: one per side effect."""
        return {delivery.idempotency_key for delivery in self.deliveries}

    async def wait_for(self, count: int, timeout: float = 15.0) -> list[Delivery]:
        """Wait until at least ``count`` requests have arrived; returns them all."""

        async def arrived() -> bool:
            return len(self.deliveries) >= count

        await eventually(arrived, timeout=timeout, what=f"{count} deliveries")
        return list(self.deliveries)

    @contextmanager
    def serving(self) -> Iterator[Receiver]:
        thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self.release()
            self._server.shutdown()
            self._server.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                is_json = "json" in self.headers.get("Content-Type", "")
                body = json.loads(raw) if is_json else raw
                receiver.deliveries.append(
                    Delivery(self.path, self.headers.get(IDEMPOTENCY_HEADER), body)
                )
                receiver._released.wait(HOLD_LIMIT_SECONDS)
                failing = receiver._failures_left > 0
                receiver._failures_left -= failing
                self.send_response(503 if failing else 200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet: the tests assert on what arrived instead."""

        return Handler
