"""A thread as an AG-UI client holds it, so the bench sends what real clients send."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

AGENT = "demo"
PROMPT = "bench run"
"""No address and no keyword: the demo agent just answers, in ten events (RUN_STARTED,
the reply as four deltas between TEXT_MESSAGE_START/END, STATE_SNAPSHOT,
MESSAGES_SNAPSHOT, RUN_FINISHED) after one model activity."""


@dataclass
class Conversation:
    """One thread's client side: it resends the whole conversation, and the state, on
    every run.

    That is what AG-UI clients do (see README; ``@ag-ui/client`` sends back the state of
    the last ``STATE_SNAPSHOT``), so each run's input, and the snapshots it gets back,
    grow with the thread as they would in production.
    """

    thread_id: str = field(default_factory=lambda: f"bench-{uuid.uuid4()}")
    messages: list[dict[str, Any]] = field(default_factory=list)
    state: dict[str, Any] = field(default_factory=dict)
    runs: int = 0

    def next_input(self, content: str = PROMPT) -> dict[str, Any]:
        """The ``RunAgentInput`` JSON of the thread's next run: one new user message."""
        self.runs += 1
        self.messages.append({"id": f"u{self.runs}", "role": "user", "content": content})
        return {
            "threadId": self.thread_id,
            "runId": f"r{self.runs}",
            "messages": self.messages,
            "state": self.state,
        }

    def resume_input(self, resume: list[dict[str, Any]]) -> dict[str, Any]:
        """The ``RunAgentInput`` JSON of a run that answers the thread's interrupts: the
        conversation as it stands, no new message."""
        self.runs += 1
        return {
            "threadId": self.thread_id,
            "runId": f"r{self.runs}",
            "messages": self.messages,
            "state": self.state,
            "resume": resume,
        }

    def adopt(self, event: dict[str, Any]) -> None:
        """Adopt a run's event, if it is a snapshot: a ``MESSAGES_SNAPSHOT``'s conversation
        (the agent's replies included), a ``STATE_SNAPSHOT``'s state."""
        if event["type"] == "MESSAGES_SNAPSHOT":
            self.messages = list(event["messages"])
        elif event["type"] == "STATE_SNAPSHOT":
            self.state = event["snapshot"]
