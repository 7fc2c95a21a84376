"""A run's ``MESSAGES_SNAPSHOT`` written with the JSON its request's messages were
digested with: byte for byte what ``ag_ui``'s encoder writes; the messages a principal
sent before taken as validated then; and a body that sends the last snapshot back read
after it, as the whole body reads."""

from __future__ import annotations

import json
from typing import Any

import pytest
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
from hypothesis import example, given
from hypothesis import strategies as st
from pydantic import TypeAdapter

from gateway.limits import MAX_JSON_DEPTH, parse_json
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
    sent.encoded[0] = sent.encoded[0]._replace(json=b'{"marker":true}')
    event = MessagesSnapshotEvent(messages=list(sent.messages))

    written = json.loads(sent.encode_snapshot(event).removeprefix("data: "))

    assert written["messages"][0] == {"marker": True}
    assert written["messages"][1:] == [
        json.loads(m.model_dump_json(by_alias=True)) for m in sent.messages[1:]
    ]


def test_equal_messages_that_are_not_the_requests_own_are_serialised_again() -> None:
    sent = SentMessages(conversation())
    sent.encoded[0] = sent.encoded[0]._replace(json=b'{"marker":true}')
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
    body = {"threadId": "t", "runId": "r", "messages": known.fresh(), "state": {}}
    body |= {"tools": [], "context": [], "forwardedProps": {}}
    messages = known.merged(RunAgentInput.model_validate(body).messages)
    return cache.sent(known, messages, principal, "t")


def _json(sent: SentMessages) -> list[bytes]:
    return [each.json for each in sent.encoded]


def _same(a: list[Any], b: list[Any]) -> list[bool]:
    return [x is y for x, y in zip(a, b, strict=True)]


def test_a_resent_message_gets_the_model_and_the_json_made_when_it_was_first_sent() -> None:
    cache = SentMessageCache()
    first = _sent(cache, "ann", _parsed())
    again = _sent(cache, "ann", _parsed())

    assert first.encoded == SentMessages(first.messages).encoded
    assert again.digests == first.digests
    assert all(_same(list(again.messages), list(first.messages)))
    assert all(_same(_json(again), _json(first)))


def test_a_message_sent_differently_or_by_another_principal_is_validated_anew() -> None:
    cache = SentMessageCache()
    first = _sent(cache, "ann", _parsed())
    bob = _sent(cache, "bob", _parsed())
    edited = _parsed()
    edited[-1]["content"] = "Sent!"
    changed = _sent(cache, "ann", edited)

    assert bob.encoded == first.encoded and bob.messages == first.messages
    assert not any(_same(list(bob.messages), list(first.messages)))
    assert _json(changed)[-1] == budgets.to_json(changed.messages[-1])
    assert b"Sent!" in _json(changed)[-1]
    assert _same(list(changed.messages), list(first.messages)) == [True] * 6 + [False]


def test_only_the_messages_not_kept_are_left_to_validate_and_to_check() -> None:
    cache = SentMessageCache()
    _sent(cache, "ann", _parsed())
    edited = _parsed()
    edited[-1]["content"] = "Sent!"

    known = cache.known("ann", edited)

    [fresh] = known.fresh()
    assert fresh is edited[-1]
    assert known.checked() == set(range(len(edited) - 1))


def test_the_least_recently_sent_are_forgotten_past_the_bound() -> None:
    parsed = _parsed()
    cache = SentMessageCache(max_bytes=3 * 1024 + 3 * 200)
    first = _sent(cache, "ann", parsed[:1])
    _sent(cache, "ann", [{"id": f"u{n}", "role": "user", "content": "x"} for n in range(8)])
    again = _sent(cache, "ann", parsed[:1])

    assert again.messages == first.messages and again.messages[0] is not first.messages[0]


# --- the last snapshot, sent back --------------------------------------------------------


def _compact(value: Any) -> bytes:
    """``value`` as a client writes a body: ``JSON.stringify``, compact."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def _snapshot_sent(cache: SentMessageCache, principal: str = "ann") -> list[Any]:
    """A run of thread ``t`` by ``principal``: its request's messages, then the snapshot
    it ends with, its reply after them; the snapshot's messages as the client adopts
    them."""
    sent = _sent(cache, principal, _parsed())
    reply = [AssistantMessage(id="a3", content="And then 日本.")]
    written = sent.encode_snapshot(MessagesSnapshotEvent(messages=[*sent.messages, *reply]))
    adopted: list[Any] = json.loads(written.removeprefix("data: "))["messages"]
    return adopted


def _body(messages: list[Any], **fields: Any) -> dict[str, Any]:
    return {"threadId": "t", "runId": "r2", "messages": messages, "state": {}} | fields


def test_a_body_sending_back_the_last_snapshot_is_parsed_after_its_messages() -> None:
    cache = SentMessageCache()
    adopted = _snapshot_sent(cache)
    new = {"id": "u9", "role": "user", "content": "and again"}
    body = _body([*adopted, new], state={"outbox": ["a@b.com"]})

    resent = cache.resent("ann", _compact(body))

    assert resent is not None
    assert resent.body == body | {"messages": [new]}
    assert [encoded.json for encoded in resent.snapshot.encoded] == [
        budgets.to_json(json_message) for json_message in adopted
    ]


def test_reading_a_body_after_the_snapshot_gives_the_input_reading_it_whole_gives() -> None:
    cache = SentMessageCache()
    adopted = _snapshot_sent(cache)
    body = _body([*adopted, {"id": "u9", "role": "user", "content": "x"}])
    resent = cache.resent("ann", _compact(body))
    assert resent is not None

    known = cache.known("ann", resent.body["messages"], resent.snapshot)
    fields = {"tools": [], "context": [], "forwardedProps": {}}
    validated = RunAgentInput.model_validate(resent.body | fields | {"messages": known.fresh()})
    messages = known.merged(validated.messages)
    sent = cache.sent(known, messages, "ann", "t")

    whole = RunAgentInput.model_validate(body | fields)
    assert messages == whole.messages
    assert sent.digests == SentMessages(whole.messages).digests
    assert known.checked() == set(range(len(adopted)))
    assert all(_same(messages[: len(adopted)], resent.snapshot.messages))


@pytest.mark.parametrize(
    "case",
    ["other principal", "other thread", "written with spaces", "one message edited", "none"],
)
def test_a_body_that_does_not_begin_its_messages_with_the_snapshot_is_left_whole(
    case: str,
) -> None:
    cache = SentMessageCache()
    adopted = _snapshot_sent(cache)
    principal, body = "ann", _compact(_body(adopted))
    if case == "other principal":
        principal = "bob"
    elif case == "other thread":
        body = _compact(_body(adopted, threadId="t2"))
    elif case == "written with spaces":
        body = json.dumps(_body(adopted), ensure_ascii=False).encode()
    elif case == "one message edited":
        body = _compact(_body([*adopted[:-1], adopted[-1] | {"content": "And then 日本!"}]))
    else:
        cache = SentMessageCache()

    assert cache.resent(principal, body) is None


def test_the_snapshots_json_anywhere_but_at_the_start_of_the_messages_is_not_taken() -> None:
    cache = SentMessageCache()
    adopted = _snapshot_sent(cache)
    decoy = {"id": "u1", "role": "user", "content": "x"}
    in_state = _compact(
        {"threadId": "t", "state": {"messages": adopted}, "messages": [decoy], "runId": "r"}
    )
    overridden = _compact(_body(adopted))[:-1] + b',"messages":[' + _compact(decoy) + b"]}"

    assert cache.resent("ann", in_state) is None
    assert cache.resent("ann", overridden) is None
    assert json.loads(overridden)["messages"] == [decoy]


@example(head=b'{"threadId":"t","state":{"messages":[', tail=b']},"messages":["x"]}')
@example(head=b'{"threadId":"t","messages":[', tail=b'],"messages":["x"]}')
@given(
    head=st.sampled_from(
        [
            b'{"threadId":"t","runId":"r","messages":[',
            b'{"threadId":"t","state":{"messages":[',
            b'{"threadId":"t","state":"\\"messages\\":[',
            b'{"threadId":"t","messages":[[',
        ]
    ),
    tail=st.lists(
        st.sampled_from(
            [b",", b"]", b"}", b"[", b"{", b'"', b"\\", b":", b"0", b"1e400", b"NaN", b" "]
            + [b'"messages":[', b'{"id":"u9","role":"user","content":"x"}', b'"runId":"r"']
            + [b']},"messages":[', b"]}"]
        ),
        max_size=12,
    ).map(b"".join),
)
def test_what_is_read_after_the_snapshot_is_what_the_whole_body_reads_as(
    head: bytes, tail: bytes
) -> None:
    cache = SentMessageCache()
    adopted = _snapshot_sent(cache)
    snapshot_json = _compact(adopted)[1:-1]
    body = head + snapshot_json + tail

    resent = cache.resent("ann", body)

    if resent is not None:
        whole = parse_json(body)
        assert whole == resent.body | {"messages": adopted + resent.body["messages"]}


def test_a_snapshot_with_a_message_a_client_could_not_send_back_as_it_is_is_not_kept() -> None:
    def deep(levels: int) -> Any:
        """Content that nests ``levels`` deep in a run's body: the body, its messages,
        the message and its content are four."""
        value: Any = "x"
        for _ in range(levels - 4):
            value = [value]
        return {"deep": value}

    kinds: list[Message] = [
        AssistantMessage(id="a3", content="fine"),
        AssistantMessage(
            id="a3",
            tool_calls=[
                ToolCall(
                    id="call 1", type="function", function=FunctionCall(name="f", arguments="{}")
                )
            ],
        ),
        ActivityMessage(id="x2", activity_type="progress", content=deep(MAX_JSON_DEPTH)),
        ActivityMessage(id="x2", activity_type="progress", content=deep(MAX_JSON_DEPTH + 1)),
        UserMessage.model_validate({"id": "u3", "role": "user", "content": "x", "n": 2**70}),
    ]
    kept = []
    for message in kinds:
        cache = SentMessageCache()
        sent = _sent(cache, "ann", _parsed())
        written = sent.encode_snapshot(MessagesSnapshotEvent(messages=[*sent.messages, message]))
        adopted = json.loads(written.removeprefix("data: "))["messages"]
        kept.append(cache.resent("ann", _compact(_body(adopted))) is not None)

    assert kept == [True, False, True, False, True]


def test_the_least_recently_sent_snapshots_are_forgotten_past_the_bound() -> None:
    cache = SentMessageCache(max_bytes=16 * 1024)
    adopted = _snapshot_sent(cache)
    for n in range(40):
        other = cache.sent(cache.known("ann", []), [], "ann", f"t{n}")
        other.encode_snapshot(MessagesSnapshotEvent(messages=conversation()))

    assert cache.resent("ann", _compact(_body(adopted))) is None


def test_a_requests_own_messages_validate_from_their_json_as_they_did() -> None:
    """What lets a snapshot's own messages go unchecked when a client sends them back
    (``sent_messages._resendable``): a message the gateway took validates from its JSON
    to the same model."""
    parsed = [
        *_parsed(),
        {"id": "u2", "role": "user", "content": "x", "name": None, "metadata": {"k": 1}},
        {"id": "u3", "role": "user", "content": [{"type": "text", "text": "a"}]},
        {"id": "a4", "role": "assistant", "content": None, "extra": {"n": 1.0, "big": 2**80}},
        {"id": "t2", "role": "tool", "toolCallId": "c1", "content": "x", "error": "bad"},
        {"id": "r1", "role": "reasoning", "content": "think"},
    ]
    body = {"threadId": "t", "runId": "r", "messages": parsed, "state": {}}
    messages = RunAgentInput.model_validate(body).messages

    read = TypeAdapter(Message)
    again = [read.validate_python(json.loads(budgets.to_json(m))) for m in messages]

    assert again == messages
    assert [budgets.to_json(m) for m in again] == [budgets.to_json(m) for m in messages]
