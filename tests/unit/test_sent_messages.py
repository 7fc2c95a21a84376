"""A run's ``MESSAGES_SNAPSHOT`` written with the JSON its request's messages were
digested with: byte for byte what ``ag_ui``'s encoder writes."""

from __future__ import annotations

import json

from ag_ui.core import (
    ActivityMessage,
    AssistantMessage,
    DeveloperMessage,
    FunctionCall,
    Message,
    MessagesSnapshotEvent,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from ag_ui.encoder import EventEncoder

from gateway.sent_messages import SentMessages


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
