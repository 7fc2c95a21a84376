"""The messages a run request sent, each serialised to JSON once for the whole request
and, as a principal sends it again, once for all the requests that do
(:class:`SentMessageCache`).

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
from typing import Any, NamedTuple

import pydantic_core
from ag_ui.core import Message, MessagesSnapshotEvent
from ag_ui.encoder import EventEncoder

from workflows.budgets import KIB, to_json
from workflows.known_messages import message_digest

SENT_MESSAGE_BYTES = 32 * KIB * KIB
"""About how much memory :class:`SentMessageCache` may hold (:func:`_cost`): some
25,000 messages of a hundred bytes or so, a long conversation's 800 thirty times over."""

Key = tuple[str, bytes]
"""A sent message in :class:`SentMessageCache`: its principal, and its JSON as parsed
written out again."""

_EMPTY_TAIL = '"messages":[]}'
"""How the JSON of a ``MESSAGES_SNAPSHOT`` without messages ends when ``messages`` is
its last field, the slot its messages' JSON goes into."""


class Encoded(NamedTuple):
    """One message's JSON and digest."""

    json: bytes
    """The message as the data converter writes it (``budgets.to_json``), which is also
    how ``ag_ui``'s encoder writes it inside an event."""
    digest: bytes
    """``known_messages.message_digest`` of :attr:`json`."""

    @classmethod
    def of(cls, message: Message) -> Encoded:
        """``message``'s JSON and digest."""
        json = to_json(message)
        return cls(json, message_digest(json))


class SentMessages:
    """A request's messages, with their JSON and digests in the same order."""

    def __init__(
        self, messages: Sequence[Message], encoded: Sequence[Encoded] | None = None
    ) -> None:
        """
        Args:
            encoded: Each message's JSON and digest, where the caller has them
                (:class:`SentMessageCache`); made here otherwise.
        """
        self.messages = messages
        if encoded is None:
            encoded = [Encoded.of(message) for message in messages]
        self.json = [each.json for each in encoded]
        self.digests = [each.digest for each in encoded]

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


class Known(NamedTuple):
    """A request's messages as :class:`SentMessageCache` knows them."""

    keys: list[Key]
    """Each message's key, in order."""
    models: list[Message | None]
    """Each message's model where it is kept, else ``None``."""

    def fresh(self, parsed: Sequence[Any]) -> list[Any]:
        """The messages of ``parsed`` not kept, in order: all that is left to validate."""
        return [raw for raw, model in zip(parsed, self.models, strict=True) if model is None]

    def merged(self, validated: Sequence[Message]) -> list[Message]:
        """The request's messages in order: the kept models, and ``validated`` (the
        models of :meth:`fresh`, in order) in the places between."""
        made = iter(validated)
        return [next(made) if model is None else model for model in self.models]

    def checked(self) -> set[int]:
        """The positions of the kept messages, whose ids were checked when they were
        first sent (``gateway.limits.id_problems``)."""
        return {i for i, model in enumerate(self.models) if model is not None}


class SentMessageCache:
    """The messages each principal sent lately, validated and serialised, by the message
    as parsed from its request: a client resends the whole conversation with every run,
    and validating every message and serialising it with ``ag_ui``'s serializer were the
    costliest parts of reading it again (``docs/bench.md``, "By process").

    A message's model, and so its JSON, is a function of what the client sent for it,
    so a message sent as before gets the model validated then, its JSON and its digest,
    and only the others are validated (:class:`Known`); its key, the message as parsed
    written out again, costs a tenth of serialising the model. Only a request whose body
    passed the gateway's checks keeps its messages (``gateway.runs``), so a kept model's
    ids were checked too (``gateway.limits.id_problems``). Keys are per principal, so no
    one's request is faster for what another sent. Nothing changes a model once
    validated (the gateway only reads a request's messages). The least recently used go
    first past ``max_bytes``; a message not kept is only validated and serialised again.
    """

    def __init__(self, max_bytes: int = SENT_MESSAGE_BYTES) -> None:
        self._max_bytes = max_bytes
        self._kept: OrderedDict[Key, tuple[Message, Encoded]] = OrderedDict()
        self._bytes = 0

    def known(self, principal: str, parsed: Sequence[Any]) -> Known:
        """What this cache holds of a request's messages as parsed, by ``principal``."""
        keys = [(principal, pydantic_core.to_json(raw)) for raw in parsed]
        models: list[Message | None] = []
        for key in keys:
            kept = self._kept.get(key)
            if kept is None:
                models.append(None)
            else:
                self._kept.move_to_end(key)
                models.append(kept[0])
        return Known(keys, models)

    def sent(self, keys: Sequence[Key], messages: Sequence[Message]) -> SentMessages:
        """``messages``, the request's whole (``Known.merged``) for ``keys``, as
        :class:`SentMessages`; those not kept yet are kept from now on. Only for a
        request whose body passed the gateway's checks."""
        encoded = []
        for key, message in zip(keys, messages, strict=True):
            kept = self._kept.get(key)
            if kept is None:
                kept = (message, Encoded.of(message))
                self._kept[key] = kept
                self._bytes += _cost(key, kept[1])
                while self._bytes > self._max_bytes:
                    old_key, (_, old) = self._kept.popitem(last=False)
                    self._bytes -= _cost(old_key, old)
            encoded.append(kept[1])
        return SentMessages(messages, encoded)


def _cost(key: Key, encoded: Encoded) -> int:
    """About the memory one kept message holds: its key, its JSON, its model (some ten
    times a short message's JSON, about the size of a long one's), its digest and the
    entries."""
    return len(key[0]) + len(key[1]) + 2 * len(encoded.json) + KIB
