"""Compatibility with the earlier AG-UI interrupt draft.

The draft sent ``resume`` as one object ``{interruptId, payload}`` and ended an
interrupted run with ``outcome: "interrupt"`` and a single ``interrupt: {id, reason,
payload}``. Inputs in that shape are understood (normalised to 1.0); clients that need the
draft's output too opt in with ``?compat=draft`` on the run URL.
"""

from __future__ import annotations

from typing import Any

from ag_ui.core import BaseEvent, RunFinishedEvent, RunFinishedInterruptOutcome

DRAFT = "draft"


def normalise_draft_resume(body: Any) -> Any:
    """Turn a draft ``resume`` object into the 1.0 list with one ``resolved`` entry."""
    if isinstance(body, dict) and isinstance(body.get("resume"), dict):
        entry = {"status": "resolved", **body["resume"]}
        return {**body, "resume": [entry]}
    return body


def encode_draft(event: BaseEvent) -> dict[str, Any]:
    """The event as a draft client expects it: only an interrupted ``RUN_FINISHED`` differs.

    The draft carried one interrupt; the first is sent as ``interrupt`` and all of them
    stay available under ``interrupts``.
    """
    data: dict[str, Any] = event.model_dump(mode="json", by_alias=True)
    if isinstance(event, RunFinishedEvent) and isinstance(
        event.outcome, RunFinishedInterruptOutcome
    ):
        interrupts = data.pop("outcome")["interrupts"]
        first = interrupts[0]
        data["outcome"] = "interrupt"
        data["interrupt"] = {
            "id": first["id"],
            "reason": first["reason"],
            "payload": {k: v for k, v in first.items() if k not in ("id", "reason")},
        }
        data["interrupts"] = interrupts
    return data
