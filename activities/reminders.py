"""Reminders that an interrupt is about to expire, posted to a webhook.

The thread workflow decides when to remind (see ``ThreadWorkflow``); this activity only
delivers. Delivery is retried with backoff until the interrupt expires, and a reminder
that cannot be delivered changes nothing on the thread.
"""

from __future__ import annotations

from temporalio import activity

from activities.webhooks import post_json
from workflows.models import ReminderNotice


class Reminders:
    """Delivers reminder notices.

    Args:
        webhook_url: Where to post them; ``None`` turns reminders off (they are logged).
        timeout_seconds: How long one delivery attempt may take.
    """

    def __init__(self, webhook_url: str | None, timeout_seconds: float) -> None:
        self._url = webhook_url
        self._timeout = timeout_seconds

    @activity.defn(name="send_reminder")
    async def send_reminder(self, notice: ReminderNotice) -> None:
        """Post ``notice`` to the webhook."""
        if self._url is None:
            activity.logger.info("no reminder webhook configured; not sending %s", notice)
            return
        await post_json(
            self._url,
            notice.model_dump(mode="json", by_alias=True, exclude_none=True),
            notice.idempotency_key,
            self._timeout,
        )
