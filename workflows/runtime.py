"""What agent code sees while it runs inside the thread workflow.

An agent never touches the workflow directly: it reads the conversation from a
:class:`RunContext` and produces AG-UI events through it, so the thread's event log,
message list and state stay consistent whatever the agent does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from ag_ui.core import (
        AgentCapabilities,
        AssistantMessage,
        BaseEvent,
        Message,
        RunAgentInput,
        TextMessageContentEvent,
        TextMessageEndEvent,
        TextMessageStartEvent,
        UserMessage,
    )


class RunContext:
    """One run of an agent on a thread.

    Args:
        input: The run's AG-UI input, as the client sent it.
        messages: The thread's messages, oldest first (read-only: use ``add_message``).
        state: The thread's shared state (the dict itself: agents mutate it in place).
        emit: Appends an event to the thread's event log for this run.
        add_message: Appends a message to the thread's conversation.
    """

    def __init__(
        self,
        input: RunAgentInput,
        messages: Sequence[Message],
        state: dict[str, Any],
        emit: Callable[[BaseEvent], None],
        add_message: Callable[[Message], None],
    ) -> None:
        self.input = input
        self.messages = messages
        self.state = state
        self.emit = emit
        self.add_message = add_message

    def latest_user_text(self) -> str:
        """The text of the newest user message ("" when there is none)."""
        for message in reversed(self.messages):
            if isinstance(message, UserMessage):
                if isinstance(message.content, str):
                    return message.content
                return " ".join(
                    part.text for part in message.content if getattr(part, "text", None)
                )
        return ""

    def say(self, deltas: Iterable[str]) -> AssistantMessage:
        """Stream an assistant text message and add it to the thread.

        Args:
            deltas: The message's text in the pieces it should stream in.
        """
        # Ids come from workflow.uuid4() so that replay produces the same ones.
        message_id = str(workflow.uuid4())
        self.emit(TextMessageStartEvent(message_id=message_id, role="assistant"))
        text = ""
        for delta in deltas:
            if delta:
                self.emit(TextMessageContentEvent(message_id=message_id, delta=delta))
                text += delta
        self.emit(TextMessageEndEvent(message_id=message_id))
        message = AssistantMessage(id=message_id, content=text)
        self.add_message(message)
        return message


class Agent(Protocol):
    """An agent the engine can serve: a name, what it can do, and its turn logic.

    ``run`` is workflow code: it must be deterministic and do all I/O through
    activities (``workflow.execute_activity``).
    """

    name: str
    description: str

    def capabilities(self) -> AgentCapabilities:
        """What ``GET /agents/{name}/capabilities`` declares."""
        ...

    async def run(self, ctx: RunContext) -> None:
        """Handle one run: read ``ctx``, emit the reply."""
        ...
