"""The command the upgrade changes: stage 1 sends with ``send_v1``, later stages with
``send_v2``. Being different activity types, they make different commands, which is
what a replay of an old history notices."""

from __future__ import annotations

from temporalio import activity


@activity.defn
async def send_v1() -> str:
    """The old way to send."""
    return "v1"


@activity.defn
async def send_v2() -> str:
    """The new way to send."""
    return "v2"
