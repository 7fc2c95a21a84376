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

from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import pydantic_core
from ag_ui.core import Message, MessagesSnapshotEvent
from ag_ui.encoder import EventEncoder

from workflows.budgets import KIB, to_json
from workflows.known_messages import message_digest

MESSAGE_JSON_BYTES = 16 * KIB * KIB
"""How many bytes of messages :class:`MessageJson` keeps, their keys counted: some 50,000
messages of a few hundred bytes, a long conversation's 800 sixty times over."""
ENTRY_OVERHEAD = 120
"""What one kept message costs beyond its bytes (the entry, its key's tuple and bytes
objects), counted against :data:`MESSAGE_JSON_BYTES`."""

_EMPTY_TAIL = '"messages":[]}'
"""How the JSON of a ``MESSAGES_SNAPSHOT`` without messages ends when ``messages`` is
its last field, the slot its messages' JSON goes into."""


class SentMessages:
    """A request's messages, with their JSON and digests in the same order."""

    def __init__(self, messages: Sequence[Message], json: Sequence[bytes] | None = None) -> None:
        """
        Args:
            json: Each message's JSON as ``budgets.to_json`` writes it, where the caller
                has it (:class:`MessageJson`); made here otherwise.
        """
        self.messages = messages
        self.json = list(json) if json is not None else [to_json(m) for m in messages]
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


class MessageJson:
    """The JSON of the messages each principal sent lately, by the message as parsed
    from its request: a client resends the whole conversation with every run, and
    ``ag_ui``'s serializer is the costliest part of reading it again (``docs/bench.md``,
    "By process").

    A message's JSON is a function of what the client sent for it (the model is
    validated from it), so a message sent as before gets the JSON made then; its key,
    that JSON as parsed written out again, costs a tenth of the model's. Keys are per
    principal, so no one's request is faster for what another sent. The least recently
    used go first past ``max_bytes``; a message not kept is only serialised again.
    """

    def __init__(self, max_bytes: int = MESSAGE_JSON_BYTES) -> None:
        self._max_bytes = max_bytes
        self._kept: OrderedDict[tuple[str, bytes], bytes] = OrderedDict()
        self._bytes = 0

    def sent(
        self, principal: str, messages: Sequence[Message], parsed: Sequence[Any]
    ) -> SentMessages:
        """``messages``, validated from ``parsed`` (the request body's ``messages`` as
        parsed, in the same order), as :class:`SentMessages`."""
        return SentMessages(
            messages,
            [
                self._json(principal, message, raw)
                for message, raw in zip(messages, parsed, strict=True)
            ],
        )

    def _json(self, principal: str, message: Message, raw: Any) -> bytes:
        key = (principal, pydantic_core.to_json(raw))
        kept = self._kept.get(key)
        if kept is not None:
            self._kept.move_to_end(key)
            return kept
        encoded = to_json(message)
        self._kept[key] = encoded
        self._bytes += _size(key, encoded)
        while self._bytes > self._max_bytes:
            old_key, old = self._kept.popitem(last=False)
            self._bytes -= _size(old_key, old)
        return encoded


def _size(key: tuple[str, bytes], encoded: bytes) -> int:
    """What one kept message counts against :data:`MESSAGE_JSON_BYTES`."""
    return len(key[0]) + len(key[1]) + len(encoded) + ENTRY_OVERHEAD
