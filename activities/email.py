"""The demo agent's ``send_email`` tool.

A stand-in for a real mail API: it delivers nothing, but it behaves like a side effect
should, with an idempotency key so that a retried activity never sends twice.
"""

from __future__ import annotations

import hashlib

from pydantic import BaseModel
from temporalio import activity


class SendEmailInput(BaseModel):
    """One email, and the key that makes sending it idempotent."""

    to: str
    subject: str
    body: str
    idempotency_key: str
    """Derived from the thread and the tool call: the same call sends at most once."""


class SendEmailResult(BaseModel):
    """The provider's id for the sent message."""

    message_id: str


@activity.defn
async def send_email(email: SendEmailInput) -> SendEmailResult:
    """Send ``email`` (simulated); the message id is a function of the idempotency key."""
    digest = hashlib.sha256(email.idempotency_key.encode()).hexdigest()[:12]
    return SendEmailResult(message_id=f"msg-{digest}")
