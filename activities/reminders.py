"""Notices about open interrupts, posted to a webhook: reminders that one is about to
expire, and escalations of approvals nobody settled in time.

The thread workflow decides when (``workflows/deadlines.py``); these activities only
deliver. Delivery is retried with backoff, and a notice that cannot be delivered changes
nothing on the thread.
"""

from __future__ import annotations

from typing import Any

from temporalio import activity

from activities.webhooks import post_json
from workflows.models import EscalationNotice, ReminderNotice


class Reminders:
    """Delivers reminder and escalation notices.

    Args:
        webhook_url: Where to post them; ``None`` turns them off (they are logged).
        timeout_seconds: How long one delivery attempt may take.
    """

    def __init__(self, webhook_url: str | None, timeout_seconds: float) -> None:
        self._url = webhook_url
        self._timeout = timeout_seconds

    @activity.defn(name="send_reminder")
    async def send_reminder(self, notice: ReminderNotice) -> None:
        """Post ``notice`` to the webhook."""
        await self._post(
            notice.model_dump(mode="json", by_alias=True, exclude_none=True),
            notice.idempotency_key,
        )

    @activity.defn(name="send_escalation")
    async def send_escalation(self, notice: EscalationNotice) -> None:
        """Post ``notice`` (``interrupt.escalated``) to the webhook."""
        await self._post(
            notice.model_dump(mode="json", by_alias=True, exclude_none=True),
            notice.idempotency_key,
        )

    async def _post(self, body: dict[str, Any], key: str) -> None:
        if self._url is None:
            activity.logger.info("no webhook configured; not sending %s", key)
            return
        await post_json(self._url, body, key, self._timeout)
