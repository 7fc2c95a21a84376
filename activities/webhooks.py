"""Delivery of JSON to HTTP endpoints outside the engine: the one way activities post.

Activities run at least once, so every delivery carries an ``Idempotency-Key`` header
that stays the same across retries: the receiver can recognise a repeat and drop it.
A non-2xx answer raises, which makes Temporal retry the activity with its backoff.
"""

from __future__ import annotations

from typing import Any

import httpx

IDEMPOTENCY_HEADER = "Idempotency-Key"


async def post_json(url: str, body: Any, idempotency_key: str, timeout: float) -> None:
    """POST ``body`` as JSON to ``url``.

    Raises:
        httpx.HTTPError: The endpoint could not be reached or did not answer 2xx.
    """
    async with httpx.AsyncClient(timeout=timeout) as http:
        response = await http.post(url, json=body, headers={IDEMPOTENCY_HEADER: idempotency_key})
    response.raise_for_status()
