"""The thread workflow's own metrics, exported by the worker's Temporal runtime.

Interrupts are counted here, where they change, because only the workflow sees every
change: an interrupt expires with no client and no gateway involved. Temporal's workflow
metric meter does not count again while a workflow replays.
"""

from __future__ import annotations

from typing import Literal

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from ag_ui.core import Interrupt

    from workflows.models import AnswerStatus

OPENED = "agui_interrupts_opened"
CLOSED = "agui_interrupts_closed"


def interrupt_opened(agent: str, interrupt: Interrupt) -> None:
    workflow.metric_meter().create_counter(OPENED, "Interrupts opened").add(
        1, {"agent": agent, "reason": interrupt.reason}
    )


ClosedStatus = AnswerStatus | Literal["withdrawn"]
"""How an interrupt closed: answered (``AnswerStatus``), or withdrawn unanswered by a run
that ended with ``RUN_ERROR`` for going over a budget (``workflows/budgets.py``)."""


def interrupt_closed(agent: str, interrupt: Interrupt, status: ClosedStatus) -> None:
    workflow.metric_meter().create_counter(
        CLOSED, "Interrupts closed: resolved, cancelled, expired or withdrawn"
    ).add(1, {"agent": agent, "reason": interrupt.reason, "status": status})
