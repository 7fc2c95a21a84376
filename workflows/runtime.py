"""What agent code sees while it runs inside the thread workflow.

An agent never touches the workflow directly: it reads the conversation from a
:class:`RunContext` and produces AG-UI events through it, so the thread's event log,
message list and state stay consistent whatever the agent does.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from ag_ui.core import (
        AssistantMessage,
        Event,
        FunctionCall,
        Interrupt,
        Message,
        RunAgentInput,
        TextMessageContentEvent,
        TextMessageEndEvent,
        TextMessageStartEvent,
        ToolCall,
        ToolCallArgsEvent,
        ToolCallEndEvent,
        ToolCallResultEvent,
        ToolCallStartEvent,
        ToolMessage,
    )

    from activities.chat import last_user_text
    from workflows.models import Journal, Model, ModelDelta, Reminder


class InterruptRequest(Model):
    """An interrupt as agent code asks for it; the thread gives it its id."""

    reason: str
    message: str | None = None
    tool_call_id: str | None = None
    response_schema: dict[str, Any] | None = None
    expires_at: datetime | None = None
    metadata: dict[str, Any] | None = None
    remind_before: list[timedelta] | None = None
    """With ``expires_at``: remind (by webhook) this long before it; ``None`` uses the
    agent's ``remind_before``. A reminder already past when asked is skipped."""


class RunContext:
    """One run of an agent on a thread.

    Args:
        input: The run's AG-UI input, as the client sent it.
        messages: The thread's messages, oldest first (read-only: use ``add_message``).
        state: The thread's shared state (the dict itself: agents mutate it in place).
        emit: Appends an event to the thread's event log, to the run in progress.
        add_message: Appends a message to the thread's conversation.
        ask: Opens interrupts on the thread, with their reminders.
        remind_before: The agent's reminders, for requests that set none.
        memory: What the agent remembers for the thread, not shared with the client.
        journal: Where an SDK agent's paused turn is kept (``workflows/sdk``).
        listeners: Where to register for a model activity's streamed output, by the
            activity's id (the thread's ``model_stream`` signal delivers it).
    """

    def __init__(
        self,
        input: RunAgentInput,
        messages: Sequence[Message],
        state: dict[str, Any],
        emit: Callable[[Event], None],
        add_message: Callable[[Message], None],
        ask: Callable[[list[Interrupt], list[Reminder]], None],
        remind_before: Sequence[timedelta],
        memory: dict[str, Any],
        journal: Journal,
        listeners: dict[str, Callable[[ModelDelta], None]],
    ) -> None:
        self.input = input
        self.messages = messages
        self.state = state
        self.emit = emit
        self.add_message = add_message
        self._ask = ask
        self._remind_before = remind_before
        self.memory = memory
        self.journal = journal
        self.listeners = listeners

    def interrupt(self, requests: Sequence[InterruptRequest]) -> list[Interrupt]:
        """Ask for answers: the run ends with these interrupts once the agent returns.

        The turn does not wait here. When every interrupt is answered (or has expired)
        the thread calls the agent's ``resume`` with the answers, in a later run, maybe
        days later and maybe in a new workflow run after a continue-as-new. Returns the
        interrupts as the client sees them, ids included.
        """
        interrupts = []
        reminders = []
        for request in requests:
            interrupt = Interrupt(
                # workflow.uuid4() replays to the same id.
                id=f"int-{workflow.uuid4()}",
                reason=request.reason,
                message=request.message,
                tool_call_id=request.tool_call_id,
                response_schema=request.response_schema,
                expires_at=_iso_utc(request.expires_at) if request.expires_at else None,
                metadata=request.metadata,
            )
            interrupts.append(interrupt)
            if request.expires_at is not None:
                before = request.remind_before
                reminders += [
                    Reminder(interrupt_id=interrupt.id, at=request.expires_at - ahead)
                    for ahead in (self._remind_before if before is None else before)
                    if request.expires_at - ahead > self.now()
                ]
        self._ask(interrupts, sorted(reminders, key=lambda reminder: reminder.at))
        return interrupts

    def propose_tool_calls(self, calls: Sequence[tuple[str, dict[str, Any]]]) -> list[ToolCall]:
        """Announce tool calls as one assistant turn (``TOOL_CALL_START/ARGS/END``).

        Args:
            calls: ``(tool name, arguments)`` pairs; none announces nothing.
        """
        if not calls:
            return []
        return AssistantReply(self).finish(None, calls).tool_calls or []

    def tool_result(self, call: ToolCall, content: str) -> None:
        """Report a tool call's outcome (``TOOL_CALL_RESULT``) and add it to the thread."""
        message_id = str(workflow.uuid4())
        self.emit(
            ToolCallResultEvent(
                message_id=message_id, tool_call_id=call.id, content=content, role="tool"
            )
        )
        self.add_message(ToolMessage(id=message_id, tool_call_id=call.id, content=content))

    def tool_call(self, tool_call_id: str) -> ToolCall:
        """The tool call with ``tool_call_id`` that an assistant message of the thread made.

        Raises:
            KeyError: No message of the thread made that call.
        """
        call = find_tool_call(self.messages, tool_call_id)
        if call is None:
            raise KeyError(tool_call_id)
        return call

    def now(self) -> datetime:
        """The current time, as workflow code must read it."""
        return workflow.now()

    def latest_user_text(self) -> str:
        """The text of the newest user message ("" when there is none)."""
        return last_user_text(self.messages)

    def say(self, deltas: Iterable[str]) -> AssistantMessage:
        """Stream an assistant text message and add it to the thread.

        Args:
            deltas: The message's text in the pieces it should stream in.
        """
        reply = AssistantReply(self)
        text = ""
        for delta in deltas:
            reply.text(delta)
            text += delta
        return reply.finish(text, [])


class AssistantReply:
    """One assistant message as the client sees it: its text, then its tool calls.

    A model that streams hands its pieces to ``on_delta`` as they arrive; ``text``
    streams text the agent has in pieces. ``finish`` then sends what was not streamed
    (all of it, for a model that does not stream; the missing end of a stream that
    broke off), closes what is open and adds the message to the thread, as the complete
    reply has it. Ids come from ``workflow.uuid4()``, so replay produces the same ones.
    """

    def __init__(self, run: RunContext) -> None:
        self._run = run
        self._message_id = str(workflow.uuid4())
        self._attempt: int | None = None
        self._text: str | None = None
        """The text sent so far (``None``: no text message started)."""
        self._text_open = False
        self._calls: dict[int, tuple[str, str]] = {}
        """Tool calls started, by index: ``(id, name)``."""
        self._open_calls: list[str] = []
        """Ids of the tool calls whose arguments may still stream."""

    def on_delta(self, delta: ModelDelta) -> None:
        """A model activity's output so far (the thread's ``model_stream`` signal)."""
        if self._attempt is not None and delta.attempt < self._attempt:
            return  # A failed attempt's last signal, arriving after its retry began.
        if delta.attempt != self._attempt:
            if self._attempt is not None:
                # The activity is being retried: what the failed attempt streamed is
                # closed and left behind; the new attempt streams a new message.
                self._close()
                self._message_id = str(workflow.uuid4())
                self._text, self._text_open, self._calls = None, False, {}
            self._attempt = delta.attempt
        if delta.text:
            self.text(delta.text)
        for piece in delta.tool_calls:
            self._call(piece.index, piece.name or "", piece.arguments)

    def text(self, delta: str) -> None:
        """Send a piece of the message's text (the first one starts the message)."""
        if self._text is not None and not self._text_open:
            # Text after the tool calls began is not streamed: AG-UI streams a message's
            # text before its tool calls. The thread's message has it all.
            return
        if self._text is None:
            self._text = ""
            self._text_open = True
            self._run.emit(TextMessageStartEvent(message_id=self._message_id, role="assistant"))
        if delta:
            self._text += delta
            self._run.emit(TextMessageContentEvent(message_id=self._message_id, delta=delta))

    def finish(
        self, text: str | None, calls: Sequence[tuple[str, dict[str, Any]]]
    ) -> AssistantMessage:
        """Complete the message as ``text`` and ``calls`` (name, arguments) have it."""
        if text and self._text is None:
            for delta in word_deltas(text):
                self.text(delta)
        elif text and self._text_open and text.startswith(self._text or ""):
            self.text(text[len(self._text or "") :])
        tool_calls = []
        for index, (name, arguments) in enumerate(calls):
            encoded = json.dumps(arguments)
            if index not in self._calls:
                self._call(index, name, encoded)
                self._end_call(self._calls[index][0])
            tool_calls.append(
                ToolCall(
                    id=self._calls[index][0], function=FunctionCall(name=name, arguments=encoded)
                )
            )
        self._close()
        message = AssistantMessage(id=self._message_id, content=text, tool_calls=tool_calls or None)
        self._run.add_message(message)
        return message

    def _call(self, index: int, name: str, arguments: str) -> None:
        self._end_text()
        if index not in self._calls:
            call_id = f"tc-{workflow.uuid4()}"
            self._calls[index] = (call_id, name)
            self._open_calls.append(call_id)
            self._run.emit(
                ToolCallStartEvent(
                    tool_call_id=call_id, tool_call_name=name, parent_message_id=self._message_id
                )
            )
        if arguments:
            self._run.emit(ToolCallArgsEvent(tool_call_id=self._calls[index][0], delta=arguments))

    def _end_call(self, call_id: str) -> None:
        self._open_calls.remove(call_id)
        self._run.emit(ToolCallEndEvent(tool_call_id=call_id))

    def _end_text(self) -> None:
        if self._text_open:
            self._text_open = False
            self._run.emit(TextMessageEndEvent(message_id=self._message_id))

    def _close(self) -> None:
        self._end_text()
        for call_id in list(self._open_calls):
            self._end_call(call_id)


def word_deltas(text: str) -> list[str]:
    """``text`` in the deltas a streaming model would send: word by word."""
    words = text.split(" ")
    return [words[0], *(f" {word}" for word in words[1:])]


def find_tool_call(messages: Sequence[Message], tool_call_id: str) -> ToolCall | None:
    """The tool call with ``tool_call_id`` that an assistant message in ``messages`` made."""
    for message in reversed(messages):
        if isinstance(message, AssistantMessage):
            for call in message.tool_calls or []:
                if call.id == tool_call_id:
                    return call
    return None


def _iso_utc(moment: datetime) -> str:
    """``2026-11-25T17:00:00Z``: ISO-8601 in UTC, as AG-UI's ``expiresAt`` expects."""
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")
