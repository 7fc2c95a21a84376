"""The ``clarify`` agent: books things, asking for a time when none is named.

``ask_user`` is an interrupt-only tool: the model calls it like any tool, the call
becomes an ``input_required`` interrupt, and the chosen option is the tool's result. The
scripted model asks with it when a booking names no time. It declares nothing of what a
client sends, so it takes the defaults: any state object, any ``forwardedProps``, and
``user`` messages (and results of tools the client provides).
"""

from __future__ import annotations

import re

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from workflows.sdk import (
        AgentDefinition,
        Ask,
        ChatReply,
        ChatRequest,
        ProposedCall,
        ScriptedModel,
        interrupt_tool,
        last_user_text,
        tool_results,
    )

OPTIONS = ["18:00", "19:00", "20:00"]
TIME = re.compile(r"\b(\d{1,2}:\d{2}|\d{1,2}\s*(?:am|pm))\b", re.IGNORECASE)


def book(request: ChatRequest) -> ChatReply:
    """Book at the time named, or ask for one with ``ask_user``; then confirm."""
    text = last_user_text(request.messages)
    if "book" not in text.lower():
        return ChatReply(text='I can book things: try "book a table".')
    results = tool_results(request.messages)
    if results:
        _, answer = results[-1]
        if answer not in OPTIONS:
            return ChatReply(text="Without a time I did not book anything.")
        return ChatReply(text=f"Booked for {answer}.")
    named = TIME.search(text)
    if named is not None:
        return ChatReply(text=f"Booked for {named[1]}.")
    question = {"question": "What time should I book it for?", "options": OPTIONS}
    return ChatReply(tool_calls=[ProposedCall(name="ask_user", arguments=question)])


MODEL = ScriptedModel("clarify", book)


@interrupt_tool
def ask_user(question: str, options: list[str]) -> Ask[str]:
    """Ask the user to pick one of ``options``."""
    return Ask("input_required", message=question, response={"type": "string", "enum": options})


CLARIFY = AgentDefinition(
    name="clarify",
    description='Books things ("book a table"), asking for a time if you name none.',
    model=MODEL,
    tools=[ask_user],
)
