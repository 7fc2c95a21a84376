"""The messages a run request sent, each serialised to JSON once for the whole request.

The gateway needs a sent message's JSON twice over. Its digest tells the thread which
messages it has already (``workflows.known_messages``). And the ``MESSAGES_SNAPSHOT``
events of a run sent without those begin with these very messages: the thread leaves
them out of its reply and the gateway puts the client's own copies back
(``gateway.streaming``).
``ag_ui`` models serialise through a Python serializer of their own (it omits fields
without a value), so encoding a long conversation again for each snapshot was the part
of a run's cost in the gateway that grew most with the conversation (``docs/bench.md``,
"Where a later turn's CPU goes").
"""

from __future__ import annotations

from collections.abc import Sequence

from ag_ui.core import Message, MessagesSnapshotEvent
from ag_ui.encoder import EventEncoder

from workflows.budgets import to_json
from workflows.known_messages import message_digest

_EMPTY_TAIL = '"messages":[]}'
"""How the JSON of a ``MESSAGES_SNAPSHOT`` without messages ends when ``messages`` is
its last field, the slot its messages' JSON goes into."""


class SentMessages:
    """A request's messages, with their JSON and digests in the same order."""

    def __init__(self, messages: Sequence[Message]) -> None:
        self.messages = messages
        self.json = [to_json(message) for message in messages]
        """Each message as the data converter writes it (``budgets.to_json``), which is
        also how ``ag_ui``'s encoder writes it inside an event."""
        self.digests = [message_digest(encoded) for encoded in self.json]

    def encode_snapshot(self, event: MessagesSnapshotEvent) -> str:
        """``event`` as ``EventEncoder`` writes it (the SSE ``data:`` line), the JSON of
        its first messages reused where they are this request's own (the same objects,
        as the gateway puts them back), the others serialised as usual."""
        head = event.model_copy(update={"messages": []}).model_dump_json(by_alias=True)
        if not head.endswith(_EMPTY_TAIL):
            # Fields after ``messages`` (an event with extra fields): no slot to fill.
            return EventEncoder().encode(event)
        parts = []
        for index, message in enumerate(event.messages):
            own = index < len(self.messages) and message is self.messages[index]
            parts.append(self.json[index] if own else to_json(message))
        opening = head.removesuffix("[]}")
        return f"data: {opening}[{b','.join(parts).decode()}]}}\n\n"
