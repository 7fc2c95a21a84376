"""The thread's durable timers: interrupts that expire, reminders before they do, and
escalations of approvals nobody settled in time.

Each deadline, reminder and escalation is a Temporal timer, so it fires whether or not a
client is connected. What an expiry does to the thread (close the interrupt, let the
agent continue) is the thread's run lifecycle, and so is marking an interrupt escalated;
this module tells it when, and delivers the notices.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from ag_ui.core import Interrupt

    from activities.reminders import Reminders
    from workflows.approvers import ApproversView
    from workflows.interrupts import parse_expiry
    from workflows.models import (
        EscalationNotice,
        EscalationTargets,
        Reminder,
        ReminderNotice,
        ThreadState,
    )

REMINDER_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1), maximum_interval=timedelta(minutes=10)
)
"""Backoff for an unreachable webhook; it stops at the interrupt's deadline."""

ESCALATION_NOTICE_WINDOW = timedelta(days=1)
"""How long an escalation notice is retried for when its interrupt has no deadline (with
one, until the deadline)."""

OnExpired = Callable[[Interrupt], Awaitable[None]]
"""What the thread does when an open interrupt's deadline passes."""
OnEscalated = Callable[[str], Interrupt | None]
"""What the thread does when an open interrupt's escalation is due: mark it escalated;
the interrupt as now shown if its notice is due (``None``: nothing to send)."""


class Deadlines:
    """The timers of one thread's open interrupts and reminders, in one workflow run.

    Args:
        thread: The thread whose interrupts and reminders these are.
        on_expired: Called once an interrupt's deadline passes with it still open; it
            may have been answered by the time the thread gets to it.
        on_escalated: Called once an interrupt's escalation is due with it still open.
    """

    def __init__(
        self, thread: ThreadState, on_expired: OnExpired, on_escalated: OnEscalated
    ) -> None:
        self._thread = thread
        self._on_expired = on_expired
        self._on_escalated = on_escalated
        self._armed: set[str] = set()
        """Interrupts and reminders with a timer in this workflow run (see ``_arm_timer``)."""

    def arm_carried(self) -> None:
        """Arm the timers of what the thread carried into this workflow run.

        Deadlines are absolute, so carried interrupts expire (and escalate) exactly when
        they would have; a reminder or an escalation notice in flight at the
        continue-as-new is sent again (same key).
        """
        for interrupt in self._thread.open_interrupts:
            self.arm_expiry(interrupt)
            self.arm_escalation(interrupt)
        for reminder in self._thread.reminders:
            self.arm_reminder(reminder)

    def arm_expiry(self, interrupt: Interrupt) -> None:
        """Expire ``interrupt`` at its deadline, if it has one."""
        if interrupt.expires_at is not None:
            self._arm_timer(interrupt)

    def arm_reminder(self, reminder: Reminder) -> None:
        """Send ``reminder`` when it is due, unless its interrupt is answered first."""
        self._arm_timer(reminder)

    def arm_escalation(self, interrupt: Interrupt) -> None:
        """Escalate the open ``interrupt`` when its escalation is due, if it has one not
        yet escalated (or whose notice is still to be sent)."""
        ballot = self._thread.ballots.get(interrupt.id)
        view = ApproversView.of(interrupt.metadata)
        escalation = view.escalation if view is not None else None
        if ballot is None or escalation is None:
            return
        if escalation.escalated and not ballot.notice_due:
            return
        key = f"escalation:{interrupt.id}"
        if key not in self._armed:
            self._armed.add(key)
            asyncio.create_task(self._escalate_when_due(interrupt.id, escalation.at))

    def _arm_timer(self, item: Interrupt | Reminder) -> None:
        """Start the timer of an interrupt's deadline or of a reminder, once per workflow
        run: a thread's first run may ask before ``run`` arms what the thread carries."""
        key = _timer_key(item)
        if key in self._armed:
            return
        self._armed.add(key)
        if isinstance(item, Reminder):
            asyncio.create_task(self._remind_when_due(item))
        else:
            asyncio.create_task(self._expire_when_due(item))

    async def _expire_when_due(self, interrupt: Interrupt) -> None:
        """Hand ``interrupt`` to ``on_expired`` at its deadline unless it is answered first."""
        deadline = parse_expiry(interrupt)
        assert deadline is not None
        interrupt_id = interrupt.id

        def is_open() -> bool:
            return any(i.id == interrupt_id for i in self._thread.open_interrupts)

        if await _holds_after_timer(deadline - workflow.now(), is_open, f"expiry {interrupt_id}"):
            await self._on_expired(interrupt)

    async def _remind_when_due(self, reminder: Reminder) -> None:
        """Post a reminder of the open interrupt at ``reminder.at``.

        Answering the interrupt cancels its reminders. Delivery retries with backoff
        until the deadline; a reminder that never arrives is logged, and the thread goes
        on exactly as if it had.
        """
        thread = self._thread

        def pending() -> bool:
            return reminder in thread.reminders

        if not await _holds_after_timer(reminder.at - workflow.now(), pending, "reminder"):
            return
        interrupt = next(i for i in thread.asked if i.id == reminder.interrupt_id)
        deadline = parse_expiry(interrupt)
        assert interrupt.expires_at is not None and deadline is not None
        try:
            await workflow.execute_activity_method(
                Reminders.send_reminder,
                ReminderNotice(
                    thread_id=thread.thread_id,
                    agent=thread.agent,
                    interrupt=interrupt,
                    expires_at=interrupt.expires_at,
                    remind_at=reminder.at,
                ),
                start_to_close_timeout=timedelta(minutes=1),
                schedule_to_close_timeout=max(deadline - workflow.now(), timedelta(seconds=1)),
                retry_policy=REMINDER_RETRY,
                summary=f"reminder {interrupt.id}",
            )
        except ActivityError as error:
            workflow.logger.warning("reminder of %s not delivered: %s", interrupt.id, error.cause)
        finally:
            if pending():
                thread.reminders.remove(reminder)

    async def _escalate_when_due(self, interrupt_id: str, at: datetime) -> None:
        """At ``at``, with the interrupt still open: have the thread mark it escalated,
        then post the ``interrupt.escalated`` notice to the reminder webhook.

        Who may decide depends on ``at`` alone (``ApproversView.admits``), so a notice
        that never arrives changes nothing on the thread; delivery retries with backoff
        until the interrupt's deadline (or ``ESCALATION_NOTICE_WINDOW``).
        """
        thread = self._thread

        def is_open() -> bool:
            return any(i.id == interrupt_id for i in thread.open_interrupts)

        if not await _holds_after_timer(at - workflow.now(), is_open, f"escalation {interrupt_id}"):
            return
        interrupt = self._on_escalated(interrupt_id)
        view = ApproversView.of(interrupt.metadata) if interrupt is not None else None
        if interrupt is None or view is None or view.escalation is None:
            return
        escalation = view.escalation
        deadline = parse_expiry(interrupt)
        window = deadline - workflow.now() if deadline else ESCALATION_NOTICE_WINDOW
        try:
            await workflow.execute_activity_method(
                Reminders.send_escalation,
                EscalationNotice(
                    thread_id=thread.thread_id,
                    agent=thread.agent,
                    interrupt=interrupt,
                    escalated_to=EscalationTargets(
                        users=escalation.users, groups=escalation.groups
                    ),
                ),
                start_to_close_timeout=timedelta(minutes=1),
                schedule_to_close_timeout=max(window, timedelta(seconds=1)),
                retry_policy=REMINDER_RETRY,
                summary=f"escalation {interrupt_id}",
            )
        except ActivityError as error:
            workflow.logger.warning("escalation of %s not delivered: %s", interrupt_id, error.cause)
        finally:
            # Settled meanwhile, its ballot is gone; else the notice is no longer due.
            ballot = thread.ballots.get(interrupt_id)
            if ballot is not None:
                ballot.notice_due = False


async def _holds_after_timer(delay: timedelta, holds: Callable[[], bool], summary: str) -> bool:
    """Wait ``delay`` (a durable timer) while ``holds()``; whether it still holds."""
    if delay > timedelta(0):
        with contextlib.suppress(TimeoutError):
            await workflow.wait_condition(
                lambda: not holds(), timeout=delay, timeout_summary=summary
            )
    return holds()


def _timer_key(item: Interrupt | Reminder) -> str:
    """What makes a timer the same one again: the interrupt, or the reminder's moment."""
    if isinstance(item, Reminder):
        return f"reminder:{item.interrupt_id}:{item.at.isoformat()}"
    return f"expiry:{item.id}"
