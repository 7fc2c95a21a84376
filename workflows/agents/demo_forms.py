"""What both versions of the ``demo`` agent ask with: the quarterly form, and its
deadline and reminders from a run's ``forwardedProps``."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from ag_ui.core import RunAgentInput

DEFAULT_EXPIRY = timedelta(days=3)

QUARTERLY_FILING_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "quarter": {"type": "string", "enum": ["Q1", "Q2", "Q3", "Q4"]},
        "year": {"type": "integer", "minimum": 2000},
        "revenue": {"type": "number"},
    },
    "required": ["quarter", "year", "revenue"],
}
"""The spec's quarterly-filing form."""


def form_expiry(run_input: RunAgentInput) -> timedelta:
    """``forwardedProps.expiresInSeconds``, or three days."""
    seconds = _forwarded(run_input, "expiresInSeconds")
    return timedelta(seconds=seconds) if isinstance(seconds, int | float) else DEFAULT_EXPIRY


def form_reminders(run_input: RunAgentInput) -> list[timedelta] | None:
    """``forwardedProps.remindBeforeSeconds`` (a list of numbers), or ``None`` for the
    agent's default."""
    seconds = _forwarded(run_input, "remindBeforeSeconds")
    if not isinstance(seconds, list):
        return None
    return [timedelta(seconds=s) for s in seconds if isinstance(s, int | float)]


def _forwarded(run_input: RunAgentInput, name: str) -> Any:
    props = run_input.forwarded_props
    return props.get(name) if isinstance(props, dict) else None
