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

A client adopts a run's last ``MESSAGES_SNAPSHOT`` and sends its messages back with the
next run, written as they were sent to it (``JSON.stringify`` of what ``JSON.parse``
read). So the cache also keeps the last snapshot each of a principal's threads sent it
(:class:`Snapshot`), and a request whose messages begin with that snapshot's JSON, byte
for byte, is parsed without it (:meth:`SentMessageCache.resent`).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import pydantic_core
from ag_ui.core import Message, MessagesSnapshotEvent
from ag_ui.encoder import EventEncoder
from pydantic import TypeAdapter, ValidationError

from gateway.event_json import opening
from gateway.least_recent import LeastRecent
from gateway.limits import MAX_ID_LENGTH, message_ids_valid, parse_json
from workflows.budgets import KIB, to_json
from workflows.known_messages import message_digest

SENT_MESSAGE_BYTES = 32 * KIB * KIB
"""About how much memory :class:`SentMessageCache` may hold for its messages
(:func:`_cost`): some 25,000 messages of a hundred bytes or so, a long conversation's 800
thirty times over. Its snapshots may hold as much again (:func:`_snapshot_cost`)."""

Key = tuple[str, bytes]
"""A sent message in :class:`SentMessageCache`: its principal, and its JSON as parsed
written out again."""

_THREAD_ID = b'"threadId":"'
_MESSAGES = b'"messages":['
_MESSAGE: TypeAdapter[Message] = TypeAdapter(Message)


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


Kept = tuple[Message, Encoded]
"""A message the gateway took (or wrote) before, with its JSON and digest."""


class Snapshot(NamedTuple):
    """The messages of the last ``MESSAGES_SNAPSHOT`` a thread sent a principal: what a
    client that sends :attr:`json` back sends."""

    json: bytes
    """The messages' JSON as the snapshot wrote it, between its brackets."""
    messages: list[Message]
    encoded: list[Encoded]
    """Each message's JSON and digest, in the same order."""


class Resent(NamedTuple):
    """A request's body whose messages begin with a :class:`Snapshot`'s JSON."""

    body: dict[str, Any]
    """The body as parsed, its ``messages`` the ones after the snapshot's."""
    snapshot: Snapshot


class SentMessages:
    """A request's messages, with their JSON and digests in the same order."""

    def __init__(
        self,
        messages: Sequence[Message],
        encoded: Sequence[Encoded] | None = None,
        keep: Callable[[Snapshot], None] | None = None,
    ) -> None:
        """
        Args:
            encoded: Each message's JSON and digest, where the caller has them
                (:class:`SentMessageCache`); made here otherwise.
            keep: Given each snapshot :meth:`encode_snapshot` writes that a client may
                send back (:func:`_resendable`).
        """
        self.messages = messages
        if encoded is None:
            encoded = [Encoded.of(message) for message in messages]
        self.encoded = list(encoded)
        self.digests = [each.digest for each in encoded]
        self._keep = keep

    def encode_snapshot(self, event: MessagesSnapshotEvent) -> str:
        """``event`` as ``EventEncoder`` writes it (the SSE ``data:`` line), the JSON of
        its first messages reused where they are this request's own (the same objects,
        as the gateway puts them back), the others serialised as usual."""
        head = opening(event, "messages", [])
        if head is None:
            return EventEncoder().encode(event)
        own, encoded = self.messages, []
        resendable = self._keep is not None
        for index, message in enumerate(event.messages):
            if index < len(own) and message is own[index]:
                encoded.append(self.encoded[index])
            else:
                made = Encoded.of(message)
                resendable = resendable and _resendable(message, made.json)
                encoded.append(made)
        json = b",".join([each.json for each in encoded])
        if self._keep is not None and resendable and encoded:
            self._keep(Snapshot(json, list(event.messages), encoded))
        return f"{head}[{json.decode()}]}}\n\n"


def _resendable(message: Message, json: bytes) -> bool:
    """Whether ``json``, a message the thread wrote, is what the gateway takes from a
    client that sends it back as it is: strict JSON that nests no deeper inside a
    request's ``messages`` than a body may, ids by the rule, and validating as the same
    message. (A request's own messages are that already: the gateway took them from a
    body that passed those checks, and their JSON is their model's.)"""
    try:
        [[parsed]] = parse_json(b"[[" + json + b"]]")
        return message_ids_valid(message) and _MESSAGE.validate_python(parsed) == message
    except (ValueError, ValidationError):
        return False


class Known(NamedTuple):
    """A request's messages as :class:`SentMessageCache` knows them, each in its place."""

    kept: list[Kept | None]
    """The message's model, JSON and digest where they are kept, else ``None``."""
    keys: list[Key | None]
    """The message's key, or ``None`` where it came with a :class:`Snapshot`."""
    parsed: list[Any]
    """The message as parsed, or ``None`` where it came with a :class:`Snapshot`."""

    def fresh(self) -> list[Any]:
        """The messages as parsed that are not kept, in order: all left to validate."""
        return [raw for raw, kept in zip(self.parsed, self.kept, strict=True) if kept is None]

    def merged(self, validated: Sequence[Message]) -> list[Message]:
        """The request's messages in order: the kept models, and ``validated`` (the
        models of :meth:`fresh`, in order) in the places between."""
        made = iter(validated)
        return [next(made) if kept is None else kept[0] for kept in self.kept]

    def checked(self) -> set[int]:
        """The positions of the kept messages, whose ids were checked when they were
        first sent (``gateway.limits.id_problems``) or written (:func:`_resendable`)."""
        return {i for i, kept in enumerate(self.kept) if kept is not None}


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

    Parsing the body and writing each message out again for its key still grew with the
    conversation, so the last snapshot each of a principal's threads sent it is kept too
    (:meth:`resent`), under the same bound again.
    """

    def __init__(self, max_bytes: int = SENT_MESSAGE_BYTES) -> None:
        self._kept: LeastRecent[Key, Kept] = LeastRecent(max_bytes, _cost)
        self._snapshots: LeastRecent[tuple[str, str], Snapshot] = LeastRecent(
            max_bytes, _snapshot_cost
        )

    def resent(self, principal: str, body: bytes) -> Resent | None:
        """``body``, a run request's, parsed without the messages it begins with where
        they are the last snapshot its thread sent ``principal``, byte for byte; else
        ``None``, and the caller parses the body whole (so any error it reports is the
        body's as sent).

        The snapshot's JSON in the body is replaced by a string of random hex, and the
        rest parsed (``gateway.limits.parse_json``). Only if that string is then the
        first of the body's ``messages`` did the snapshot's JSON begin them: the bytes
        before it are the same in both bodies, so the parser came to it expecting the
        ``messages`` array's first value, and from there it reads the snapshot's
        messages (complete values, strict JSON, each nesting no deeper than a request's
        messages may) as it reads the one string, and the bytes after them alike. The
        body's ``threadId`` only says which snapshot to try.
        """
        if not self._snapshots:
            return None
        at = body.find(_THREAD_ID) + len(_THREAD_ID)
        end = body.find(b'"', at, at + MAX_ID_LENGTH + 1)
        start = body.find(_MESSAGES) + len(_MESSAGES)
        if at < len(_THREAD_ID) or end < 0 or start < len(_MESSAGES):
            return None
        snapshot = self._snapshots.get((principal, body[at:end].decode(errors="replace")))
        if snapshot is None or not body.startswith(snapshot.json, start):
            return None
        mark = secrets.token_hex(16)
        rest = body[start + len(snapshot.json) :]
        try:
            parsed = parse_json(b"".join((body[:start], b'"', mark.encode(), b'"', rest)))
        except ValueError:
            return None
        messages = parsed.get("messages") if isinstance(parsed, dict) else None
        if not isinstance(messages, list) or not messages or messages[0] != mark:
            return None
        return Resent(parsed | {"messages": messages[1:]}, snapshot)

    def known(
        self, principal: str, parsed: Sequence[Any], snapshot: Snapshot | None = None
    ) -> Known:
        """What this cache holds of a request's messages as parsed, by ``principal``,
        after those of ``snapshot`` (:meth:`resent`), if they came with one."""
        kept: list[Kept | None] = []
        if snapshot is not None:
            kept.extend(zip(snapshot.messages, snapshot.encoded, strict=True))
        before = len(kept)
        keys: list[Key | None] = [None] * before
        for raw in parsed:
            key = (principal, pydantic_core.to_json(raw))
            keys.append(key)
            kept.append(self._kept.get(key))
        return Known(kept, keys, [None] * before + list(parsed))

    def sent(
        self, known: Known, messages: Sequence[Message], principal: str, thread_id: str
    ) -> SentMessages:
        """``messages``, the request's whole (``Known.merged``), as :class:`SentMessages`
        whose snapshots are kept for ``principal`` on ``thread_id``; those not kept yet
        are kept from now on. Only for a request whose body passed the gateway's checks.
        """
        encoded = []
        for key, kept, message in zip(known.keys, known.kept, messages, strict=True):
            if kept is None:
                kept = (message, Encoded.of(message))
                if key is not None:
                    self._kept.put(key, kept)
            encoded.append(kept[1])

        def keep(snapshot: Snapshot) -> None:
            self._snapshots.put((principal, thread_id), snapshot)

        return SentMessages(messages, encoded, keep)


def _cost(key: Key, kept: Kept) -> int:
    """About the memory one kept message holds: its key, its JSON, its model (some ten
    times a short message's JSON, about the size of a long one's), its digest and the
    entries."""
    return len(key[0]) + len(key[1]) + 2 * len(kept[1].json) + KIB


def _snapshot_cost(_: tuple[str, str], snapshot: Snapshot) -> int:
    """About the memory one kept snapshot holds, as :func:`_cost` counts a message: its
    JSON, and for each message its model, JSON, digest and entries (a request's own
    messages may be the kept messages' too, and those the run wrote are the snapshot's
    alone)."""
    return 2 * len(snapshot.json) + KIB * len(snapshot.messages)
