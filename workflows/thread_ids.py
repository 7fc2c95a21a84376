"""The one mapping between AG-UI thread ids and the ids of their workflows, both ways.

The workflow holding AG-UI thread ``t`` has the id ``agui-thread-t``. A leaf: it imports
nothing, so the gateway, the logs, the tests and the bench all read the mapping here.
"""

from __future__ import annotations

THREAD_WORKFLOW_PREFIX = "agui-thread-"


def workflow_id_for(thread_id: str) -> str:
    """The id of the workflow that holds AG-UI thread ``thread_id``."""
    return f"{THREAD_WORKFLOW_PREFIX}{thread_id}"


def thread_id_of(workflow_id: str) -> str | None:
    """The AG-UI thread a workflow id holds, or ``None`` for another workflow's id."""
    if not workflow_id.startswith(THREAD_WORKFLOW_PREFIX):
        return None
    return workflow_id.removeprefix(THREAD_WORKFLOW_PREFIX)
