"""A model's reply as the client sees it: streamed while generated, complete at the end."""

from __future__ import annotations

import json

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

    from activities.chat import ChatReply, ModelDelta
    from workflows.runtime import RunContext, word_deltas


class LiveReply:
    """One model reply: one assistant message, its text and its tool calls.

    Deltas a model streams (``on_delta``) go out as they arrive; ``finish`` then sends
    whatever the stream did not (all of it, for a model that does not stream; the
    missing end of a stream that broke off), closes what is open and adds the message
    to the thread, as the model's complete reply has it.
    """

    def __init__(self, run: RunContext) -> None:
        self._run = run
        self._message_id = str(workflow.uuid4())
        self._attempt: int | None = None
        self._text: str | None = None
        """The text streamed so far (``None``: no text message started)."""
        self._text_open = False
        self._calls: dict[int, tuple[str, str, str]] = {}
        """Streamed tool calls by index: ``(id, name, arguments so far)``."""

    def on_delta(self, delta: ModelDelta) -> None:
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
            self._say(delta.text)
        for piece in delta.tool_calls:
            self._call(piece.index, piece.name or "", piece.arguments)

    def finish(self, reply: ChatReply) -> list[ToolCall]:
        """Complete the message as ``reply`` has it; its tool calls, with their ids."""
        if reply.text and self._text is None:
            for delta in word_deltas(reply.text):
                self._say(delta)
        elif reply.text and self._text_open and reply.text.startswith(self._text or ""):
            self._say(reply.text[len(self._text or "") :])
        calls = []
        for index, proposed in enumerate(reply.tool_calls):
            arguments = json.dumps(proposed.arguments)
            if index not in self._calls:
                self._call(index, proposed.name, arguments)
            call_id, _, _ = self._calls[index]
            calls.append(
                ToolCall(id=call_id, function=FunctionCall(name=proposed.name, arguments=arguments))
            )
        self._close()
        self._run.add_message(
            AssistantMessage(id=self._message_id, content=reply.text, tool_calls=calls or None)
        )
        return calls

    def _say(self, delta: str) -> None:
        if not delta or (self._text is not None and not self._text_open):
            # Text after the tool calls began is not streamed: AG-UI streams a message's
            # text before its tool calls. The thread's message has it all.
            return
        if self._text is None:
            self._text = ""
            self._text_open = True
            self._run.emit(TextMessageStartEvent(message_id=self._message_id, role="assistant"))
        self._text += delta
        self._run.emit(TextMessageContentEvent(message_id=self._message_id, delta=delta))

    def _call(self, index: int, name: str, arguments: str) -> None:
        self._end_text()
        if index not in self._calls:
            call_id = f"tc-{workflow.uuid4()}"
            self._calls[index] = (call_id, name, "")
            self._run.emit(
                ToolCallStartEvent(
                    tool_call_id=call_id, tool_call_name=name, parent_message_id=self._message_id
                )
            )
        call_id, name, so_far = self._calls[index]
        if arguments:
            self._calls[index] = (call_id, name, so_far + arguments)
            self._run.emit(ToolCallArgsEvent(tool_call_id=call_id, delta=arguments))

    def _end_text(self) -> None:
        if self._text_open:
            self._text_open = False
            self._run.emit(TextMessageEndEvent(message_id=self._message_id))

    def _close(self) -> None:
        self._end_text()
        for call_id, _, _ in self._calls.values():
            self._run.emit(ToolCallEndEvent(tool_call_id=call_id))
