"""A run's ``MESSAGES_SNAPSHOT`` written with the JSON its request's messages were
digested with: byte for byte what ``ag_ui``'s encoder writes."""

from __future__ import annotations

import json
from typing import Any

from ag_ui.core import (
    ActivityMessage,
    AssistantMessage,
    DeveloperMessage,
    FunctionCall,
    Message,
    MessagesSnapshotEvent,
    RunAgentInput,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from ag_ui.encoder import EventEncoder

from gateway.sent_messages import SentMessageCache, SentMessages
from workflows import budgets


def conversation() -> list[Message]:
    """A request's messages of every kind, with what the encoder must get right: fields
    without a value, non-ASCII and escaped text, content parts, an unknown field."""
    call = ToolCall(
        id="c1", type="function", function=FunctionCall(name="send_email", arguments='{"to":"é"}')
    )
    return [
        SystemMessage(id="s1", content="Be brief."),
        DeveloperMessage(id="d1", content="tabs\tand \u2028 separators"),
        UserMessage.model_validate(
            {
                "id": "u1",
                "role": "user",
                "content": [{"type": "text", "text": 'mail "a@b.com"'}],
                "clientOnly": {"kept": None},
            }
        ),
        AssistantMessage(id="a1", tool_calls=[call]),
        ToolMessage(id="t1", tool_call_id="c1", content="sent", error=None),
        ActivityMessage(id="x1", activity_type="progress", content={"done": 1}),
        AssistantMessage(id="a2", content="Sent."),
    ]


def test_a_snapshot_beginning_with_the_requests_messages_is_written_as_the_encoder_does() -> None:
    sent = SentMessages(conversation())
    reply = [
        AssistantMessage(id="a3", content="And then 日本."),
        UserMessage(id="u2", content="ok"),
    ]
    event = MessagesSnapshotEvent(messages=[*sent.messages, *reply])

    assert sent.encode_snapshot(event) == EventEncoder().encode(event)


def test_the_requests_own_messages_are_written_with_the_json_digested_for_them() -> None:
    sent = SentMessages(conversation())
    sent.json[0] = b'{"marker":true}'
    event = MessagesSnapshotEvent(messages=list(sent.messages))

    written = json.loads(sent.encode_snapshot(event).removeprefix("data: "))

    assert written["messages"][0] == {"marker": True}
    assert written["messages"][1:] == [
        json.loads(m.model_dump_json(by_alias=True)) for m in sent.messages[1:]
    ]


def test_equal_messages_that_are_not_the_requests_own_are_serialised_again() -> None:
    sent = SentMessages(conversation())
    sent.json[0] = b'{"marker":true}'
    copies = [message.model_copy() for message in sent.messages]
    event = MessagesSnapshotEvent(messages=copies)

    assert sent.encode_snapshot(event) == EventEncoder().encode(event)


def test_snapshots_with_fields_after_their_messages_or_none_at_all_are_written_whole() -> None:
    sent = SentMessages(conversation())
    extra = MessagesSnapshotEvent.model_validate(
        {"type": "MESSAGES_SNAPSHOT", "messages": [], "note": "x"}
    ).model_copy(update={"messages": list(sent.messages)})
    stamped = MessagesSnapshotEvent(messages=list(sent.messages), timestamp=5, raw_event={"a": 1})
    empty = MessagesSnapshotEvent(messages=[])

    for event in (extra, stamped, empty):
        assert sent.encode_snapshot(event) == EventEncoder().encode(event)
    assert '"note":"x"' in sent.encode_snapshot(extra)


def _parsed() -> list[Any]:
    """The conversation as a request's body brings it, snake_case where clients may."""
    messages = [json.loads(budgets.to_json(message)) for message in conversation()]
    tool = next(m for m in messages if m["role"] == "tool")
    tool["tool_call_id"] = tool.pop("toolCallId")
    return messages


def _sent(cache: SentMessageCache, principal: str, parsed: list[Any]) -> SentMessages:
    """A request's messages as the gateway reads them."""
    known = cache.known(principal, parsed)
    body = {"threadId": "t", "runId": "r", "messages": known.fresh(parsed), "state": {}}
    body |= {"tools": [], "context": [], "forwardedProps": {}}
    return cache.sent(known.keys, known.merged(RunAgentInput.model_validate(body).messages))


def _same(a: list[Any], b: list[Any]) -> list[bool]:
    return [x is y for x, y in zip(a, b, strict=True)]


def test_a_resent_message_gets_the_model_and_the_json_made_when_it_was_first_sent() -> None:
    cache = SentMessageCache()
    first = _sent(cache, "ann", _parsed())
    again = _sent(cache, "ann", _parsed())

    assert first.json == SentMessages(first.messages).json
    assert again.digests == first.digests
    assert all(_same(list(again.messages), list(first.messages)))
    assert all(_same(again.json, first.json))


def test_a_message_sent_differently_or_by_another_principal_is_validated_anew() -> None:
    cache = SentMessageCache()
    first = _sent(cache, "ann", _parsed())
    bob = _sent(cache, "bob", _parsed())
    edited = _parsed()
    edited[-1]["content"] = "Sent!"
    changed = _sent(cache, "ann", edited)

    assert bob.json == first.json and bob.messages == first.messages
    assert not any(_same(list(bob.messages), list(first.messages)))
    assert changed.json[-1] == budgets.to_json(changed.messages[-1])
    assert b"Sent!" in changed.json[-1]
    assert _same(list(changed.messages), list(first.messages)) == [True] * 6 + [False]


def test_only_the_messages_not_kept_are_left_to_validate_and_to_check() -> None:
    cache = SentMessageCache()
    _sent(cache, "ann", _parsed())
    edited = _parsed()
    edited[-1]["content"] = "Sent!"

    known = cache.known("ann", edited)

    [fresh] = known.fresh(edited)
    assert fresh is edited[-1]
    assert known.checked() == set(range(len(edited) - 1))


def test_the_least_recently_sent_are_forgotten_past_the_bound() -> None:
    parsed = _parsed()
    cache = SentMessageCache(max_bytes=3 * 1024 + 3 * 200)
    first = _sent(cache, "ann", parsed[:1])
    _sent(cache, "ann", [{"id": f"u{n}", "role": "user", "content": "x"} for n in range(8)])
    again = _sent(cache, "ann", parsed[:1])

    assert again.messages == first.messages and again.messages[0] is not first.messages[0]
