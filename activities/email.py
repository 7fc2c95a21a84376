"""The legacy demo agent's ``send_email`` activity (``workflows/agents/legacy_demo.py``);
the current demo's tool is ``activities/demo.py``'s.

A stand-in for a real mail API. With a mail URL configured (``AGUI_DEMO_MAIL_URL``) it
posts each email there as JSON; without one it delivers nothing. Either way it behaves
as a side effect should: the idempotency key makes a retried call a repeat the mail API
recognises, never a second email.
"""

from __future__ import annotations

import hashlib

from pydantic import BaseModel
from temporalio import activity

from activities.webhooks import post_json


class SendEmailInput(BaseModel):
    """One email, and the key that makes sending it idempotent."""

    to: str
    subject: str
    body: str
    idempotency_key: str
    """Derived from the thread, the tool call and the approval that let it run: the
    same approved call sends at most once."""


class SendEmailResult(BaseModel):
    """The provider's id for the sent message."""

    message_id: str


class Mailer:
    """The mail API the demo's emails go to.

    Args:
        url: Where to post emails; ``None`` simulates sending.
        timeout_seconds: How long one delivery attempt may take.
    """

    def __init__(self, url: str | None, timeout_seconds: float) -> None:
        self._url = url
        self._timeout = timeout_seconds

    @activity.defn(name="send_email")
    async def send_email(self, email: SendEmailInput) -> SendEmailResult:
        """Send ``email``; the message id is a function of the idempotency key."""
        if self._url is not None:
            await post_json(
                self._url,
                email.model_dump(exclude={"idempotency_key"}),
                email.idempotency_key,
                self._timeout,
            )
        digest = hashlib.sha256(email.idempotency_key.encode()).hexdigest()[:12]
        return SendEmailResult(message_id=f"msg-{digest}")
