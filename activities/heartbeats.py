"""Heartbeats that tell Temporal an activity's worker is still alive.

An activity with a heartbeat timeout whose worker dies (killed, its machine gone) is
retried once its heartbeats stop for that long, rather than after its whole
start-to-close timeout: a tool that may run for minutes, a model that thinks before it
writes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

from temporalio import activity

_T = TypeVar("_T")


async def heartbeating(work: Awaitable[_T]) -> _T:
    """Await ``work``, heartbeating meanwhile if the activity has a heartbeat timeout.

    The heartbeats say only that this worker is alive, which is what the timeout is for:
    Temporal notices a worker killed mid-call by their absence (the SDK sends them at
    most every 80% of the timeout, however often they are recorded here).
    """
    timeout = activity.info().heartbeat_timeout if activity.in_activity() else None
    if not timeout:
        return await work

    async def beat() -> None:
        while True:
            activity.heartbeat()
            await asyncio.sleep(timeout.total_seconds() / 4)

    beating = asyncio.create_task(beat())
    try:
        return await work
    finally:
        beating.cancel()
