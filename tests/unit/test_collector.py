"""The gateway's collector tuning (``gateway/collector.py``): how it is configured, and
that a long thread's request passes without a collection at the default, as it did not
at CPython's."""

from __future__ import annotations

import gc
import json
from collections.abc import Iterator

import pytest
from ag_ui.core import RunAgentInput
from pydantic import ValidationError

from gateway import collector
from gateway.limits import parse_json
from settings import Settings

TURNS = 200
"""A long conversation's turns: four messages each, as the demo's approval turns."""


@pytest.fixture(autouse=True)
def thresholds() -> Iterator[None]:
    """Each test's own thresholds, the session's restored after it."""
    kept = gc.get_threshold()
    yield
    gc.set_threshold(*kept)


def test_the_young_threshold_is_set_and_the_older_kept() -> None:
    gc.set_threshold(700, 10, 10)
    collector.configure(1234)
    assert gc.get_threshold() == (1234, 10, 10)


def test_the_setting_defaults_and_refuses_no_collection(monkeypatch: pytest.MonkeyPatch) -> None:
    assert Settings().gateway_gc_threshold == 50_000
    monkeypatch.setenv("AGUI_GATEWAY_GC_THRESHOLD", "20000")
    assert Settings().gateway_gc_threshold == 20000
    monkeypatch.setenv("AGUI_GATEWAY_GC_THRESHOLD", "0")
    with pytest.raises(ValidationError, match="gateway_gc_threshold"):
        Settings()


def _long_request() -> bytes:
    """A run's body at a long thread's last turn: every message resent."""
    messages = []
    for turn in range(TURNS):
        call = f"call-{turn}"
        messages += [
            {"id": f"u{turn}", "role": "user", "content": f"mail a{turn}@b.com the figures"},
            {
                "id": f"a{turn}",
                "role": "assistant",
                "toolCalls": [
                    {
                        "id": call,
                        "type": "function",
                        "function": {"name": "send_email", "arguments": '{"to": "a@b.com"}'},
                    }
                ],
            },
            {"id": f"t{turn}", "role": "tool", "toolCallId": call, "content": '{"sent": true}'},
            {"id": f"r{turn}", "role": "assistant", "content": f"Sent mail {turn}."},
        ]
    body = {
        "threadId": "t",
        "runId": "r",
        "state": {},
        "messages": messages,
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }
    return json.dumps(body).encode()


def _collections(body: bytes) -> int:
    """The collections while the gateway parses and validates ``body``."""
    seen = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            seen.append(info["generation"])

    gc.collect()
    gc.callbacks.append(count)
    try:
        RunAgentInput.model_validate(parse_json(body))
    finally:
        gc.callbacks.remove(count)
    return len(seen)


def test_a_long_threads_request_passes_without_a_collection() -> None:
    body = _long_request()
    collector.configure(700)
    assert _collections(body) > 0
    collector.configure(Settings().gateway_gc_threshold)
    assert _collections(body) == 0
