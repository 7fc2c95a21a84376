"""``activities/openai_chat.py``'s client: one per server and key on an event loop, so a
model call neither builds an SSL context nor opens new connections each time."""

from __future__ import annotations

from activities import openai_chat


async def test_model_calls_share_one_client_per_server_and_key() -> None:
    first = openai_chat._client("http://127.0.0.1:9/v1", "k1")
    assert openai_chat._client("http://127.0.0.1:9/v1", "k1") is first
    assert openai_chat._client("http://127.0.0.1:10/v1", "k1") is not first
    assert openai_chat._client("http://127.0.0.1:9/v1", "k2") is not first
    assert first.max_retries == 0, "Temporal retries the activity"
