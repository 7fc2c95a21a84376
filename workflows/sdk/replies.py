"""How an assistant message reaches the client: streamed as the model writes it, or in
word-sized pieces when it arrives whole, then added to the conversation."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from ag_ui.core import (
        AssistantMessage,
        FunctionCall,
        TextMessageContentEvent,
        TextMessageEndEvent,
        TextMessageStartEvent,
        ToolCall,
        ToolCallArgsEvent,
        ToolCallEndEvent,
        ToolCallStartEvent,
    )

    from workflows.budgets import STREAMED_DELTAS_PER_REPLY, WORD_DELTAS_PER_REPLY
    from workflows.models import ModelDelta
    from workflows.turn import TurnHost


class AssistantReply:
    """One assistant message as the client sees it: its text, then its tool calls.

    A model that streams hands its pieces to ``on_delta`` as they arrive; ``text``
    streams text the agent has in pieces. ``finish`` then sends what was not streamed
    (all of it, for a model that does not stream; the missing end of a stream that
    broke off), closes what is open and adds the message to the thread, as the complete
    reply has it. Ids come from ``workflow.uuid4()``, so replay produces the same ones.

    A reply is streamed in at most ``STREAMED_DELTAS_PER_REPLY`` pieces: past them what
    the model streams is held and ``finish`` sends it in one piece, so a model that
    signals thousands of tiny deltas does not fill the thread's event log.
    """

    def __init__(self, host: TurnHost) -> None:
        self._host = host
        self._message_id = str(workflow.uuid4())
        self._attempt: int | None = None
        self._text: str | None = None
        """The text sent so far (``None``: no text message started)."""
        self._text_open = False
        self._calls: dict[int, tuple[str, str]] = {}
        """Tool calls started, by index: ``(id, name)``."""
        self._open_calls: list[str] = []
        """Ids of the tool calls whose arguments may still stream."""
        self._deltas = 0
        """Streamed deltas taken so far (see ``STREAMED_DELTAS_PER_REPLY``)."""
        self._held: dict[int, str] = {}
        """Arguments streamed past the limit, by tool call index, for ``finish`` to send."""

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
                self._text, self._text_open, self._calls, self._held = None, False, {}, {}
            self._attempt = delta.attempt
        self._deltas += 1
        if self._deltas > STREAMED_DELTAS_PER_REPLY:
            # Held: ``finish`` sends the text's rest and the calls not started whole.
            for piece in delta.tool_calls:
                if piece.index in self._calls:
                    self._held[piece.index] = self._held.get(piece.index, "") + piece.arguments
            return
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
            self._host.emit(TextMessageStartEvent(message_id=self._message_id, role="assistant"))
        if delta:
            self._text += delta
            self._host.emit(TextMessageContentEvent(message_id=self._message_id, delta=delta))

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
            elif self._held.get(index):
                self._host.emit(
                    ToolCallArgsEvent(tool_call_id=self._calls[index][0], delta=self._held[index])
                )
            tool_calls.append(
                ToolCall(
                    id=self._calls[index][0], function=FunctionCall(name=name, arguments=encoded)
                )
            )
        self._close()
        message = AssistantMessage(id=self._message_id, content=text, tool_calls=tool_calls or None)
        self._host.add_message(message)
        return message

    def _call(self, index: int, name: str, arguments: str) -> None:
        self._end_text()
        if index not in self._calls:
            call_id = f"tc-{workflow.uuid4()}"
            self._calls[index] = (call_id, name)
            self._open_calls.append(call_id)
            self._host.emit(
                ToolCallStartEvent(
                    tool_call_id=call_id, tool_call_name=name, parent_message_id=self._message_id
                )
            )
        if arguments:
            self._host.emit(ToolCallArgsEvent(tool_call_id=self._calls[index][0], delta=arguments))

    def _end_call(self, call_id: str) -> None:
        self._open_calls.remove(call_id)
        self._host.emit(ToolCallEndEvent(tool_call_id=call_id))

    def _end_text(self) -> None:
        if self._text_open:
            self._text_open = False
            self._host.emit(TextMessageEndEvent(message_id=self._message_id))

    def _close(self) -> None:
        self._end_text()
        for call_id in list(self._open_calls):
            self._end_call(call_id)


def word_deltas(text: str) -> list[str]:
    """``text`` in the deltas a streaming model would send: word by word, words grouped
    so that there are at most ``WORD_DELTAS_PER_REPLY`` deltas."""
    words = text.split(" ")
    pieces = [words[0], *(f" {word}" for word in words[1:])]
    per_delta = -(-len(pieces) // WORD_DELTAS_PER_REPLY)
    return ["".join(pieces[i : i + per_delta]) for i in range(0, len(pieces), per_delta)]
