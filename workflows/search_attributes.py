"""The custom search attributes every thread workflow carries.

They let operators filter threads in the Temporal Web UI, e.g. every thread waiting on
an approval that expires within a day::

    AguiThreadStatus = "waiting" AND AguiInterruptReasons = "tool_call"
        AND AguiNextExpiry < "2026-11-24T17:00:00Z"

and let the gateway list threads and interrupts through visibility instead of scanning.
A namespace must have them registered before a thread workflow can set them:
``worker.py`` does that at start.
"""

from __future__ import annotations

from temporalio.common import SearchAttributeKey

AGENT = SearchAttributeKey.for_keyword("AguiAgent")
OWNER = SearchAttributeKey.for_keyword("AguiOwner")
"""The principal the thread belongs to: listings show each caller their own."""
THREAD_STATUS = SearchAttributeKey.for_keyword("AguiThreadStatus")
"""``running``, ``waiting`` (on interrupts) or ``idle``."""
LAST_ACTIVITY = SearchAttributeKey.for_datetime("AguiLastActivity")
"""When a run last started or ended."""
INTERRUPT_IDS = SearchAttributeKey.for_keyword_list("AguiInterruptIds")
"""The open interrupts' ids."""
INTERRUPT_REASONS = SearchAttributeKey.for_keyword_list("AguiInterruptReasons")
"""The open interrupts' reasons (``tool_call``, ``input_required``, ...)."""
NEXT_EXPIRY = SearchAttributeKey.for_datetime("AguiNextExpiry")
"""The earliest ``expiresAt`` of the open interrupts; unset when none expires."""
APPROVERS = SearchAttributeKey.for_keyword_list("AguiApprovers")
"""Who may decide the open interrupts, escalation targets included: ``u:<user>`` and
``g:<group>`` (``workflows.visibility.approver_key``), so an approver's inbox finds the
threads waiting on them."""

ALL = (
    AGENT,
    OWNER,
    THREAD_STATUS,
    LAST_ACTIVITY,
    INTERRUPT_IDS,
    INTERRUPT_REASONS,
    NEXT_EXPIRY,
    APPROVERS,
)
