"""The payload codec (``codec.py``): how keys are configured, what an encrypted payload
looks like, that keys rotate, that neither an error nor the settings ever show a key or
a payload's data, and which payloads are compressed."""

from __future__ import annotations

import base64
import os
import zlib

import pytest
from pydantic import BaseModel, ValidationError
from temporalio.api.common.v1 import Payload
from temporalio.api.failure.v1 import Failure
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.exceptions import ApplicationError

import codec
from settings import Settings
from workflows.models import ThreadView

K1 = base64.b64encode(bytes(range(32))).decode()
K2 = base64.b64encode(bytes(range(32, 64))).decode()
SECRET = b"the quarterly figures for Mrs Ottoline Brackenbury"
"""Words that must not show in anything encrypted, nor in an error."""


def plain(data: bytes = SECRET) -> Payload:
    return Payload(metadata={"encoding": b"json/plain"}, data=data)


def codec_for(text: str) -> codec.StorageCodec:
    """The engine's codec, encrypting with the keys of ``text`` and compressing nothing."""
    return codec.StorageCodec(codec.PayloadKeys.parse(text), None)


def test_keys_parse_the_first_encrypts_and_all_decrypt() -> None:
    keys = codec.PayloadKeys.parse(f" k2:{K2} , k1:{K1}")
    assert keys.active == "k2"
    assert dict(keys.keys) == {"k2": base64.b64decode(K2), "k1": base64.b64decode(K1)}


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "key #1 is not '<id>:<base64 key>'"),
        (K1, "key #1 is not '<id>:<base64 key>'"),
        (f"k 1:{K1}", "key #1 is not '<id>:<base64 key>'"),
        (f":{K1}", "key #1 is not '<id>:<base64 key>'"),
        (f"k1:{K1},", "key #2 is not '<id>:<base64 key>'"),
        (f"k1:{K1[:-2]}!!", "key 'k1' is not valid base64"),
        (f"k1:{K1[:-4]}", "key 'k1' is 30 bytes; AES-256 needs 32"),
        (f"k1:{K1},k1:{K2}", "key id 'k1' is given twice"),
    ],
    ids=["empty", "no id", "bad id", "empty id", "empty item", "base64", "length", "twice"],
)
def test_malformed_keys_are_refused_without_quoting_them(text: str, says: str) -> None:
    with pytest.raises(codec.PayloadKeysError) as raised:
        codec.PayloadKeys.parse(text)
    assert str(raised.value).startswith(says)
    with pytest.raises(ValidationError) as invalid:
        Settings(payload_keys=text)
    assert says in str(invalid.value)
    for key in (K1, K2, K1[:-4], K1[:-2]):
        assert key not in str(invalid.value) and key not in repr(invalid.value)


def test_new_keys_are_random_and_fit() -> None:
    first, second = codec.new_key(), codec.new_key()
    assert first != second
    assert codec.PayloadKeys.parse(f"a:{first},b:{second}").active == "a"


def test_settings_never_show_the_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGUI_PAYLOAD_KEYS", f"k2:{K2},k1:{K1}")
    settings = Settings()
    assert settings.payload_keys is not None
    for shown in (repr(settings), str(settings), settings.model_dump_json()):
        assert K1 not in shown and K2 not in shown


async def test_without_keys_nothing_is_encrypted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGUI_PAYLOAD_KEYS", "")
    assert Settings().payload_keys is None
    converter = Settings().data_converter()
    assert converter.failure_converter_class is pydantic_data_converter.failure_converter_class
    (payload,) = await converter.encode([Note(text=SECRET.decode())])
    assert payload.metadata["encoding"] == b"json/plain" and SECRET in payload.data


async def test_a_payload_round_trips_encrypted_whole() -> None:
    keys = codec_for(f"k1:{K1}")
    original = plain()
    (sealed,) = await keys.encode([original])
    assert dict(sealed.metadata) == {"encoding": b"binary/encrypted", "encryption-key-id": b"k1"}
    # The data, its encoding and its type are all hidden.
    assert SECRET not in sealed.data and b"json/plain" not in sealed.SerializeToString()
    assert await keys.decode([sealed]) == [original]
    # A fresh nonce each time: equal payloads do not look equal.
    (again,) = await keys.encode([original])
    assert again.data != sealed.data


async def test_keys_rotate_old_payloads_decrypt_and_new_ones_use_the_first_key() -> None:
    (old,) = await codec_for(f"k1:{K1}").encode([plain()])
    rotated = codec_for(f"k2:{K2},k1:{K1}")
    assert await rotated.decode([old]) == [plain()]
    (new,) = await rotated.encode([plain()])
    assert new.metadata[codec.KEY_ID] == b"k2"
    assert await codec_for(f"k2:{K2}").decode([new]) == [plain()]


async def test_a_payload_of_a_key_not_configured_is_refused_naming_only_the_key() -> None:
    (old,) = await codec_for(f"k1:{K1}").encode([plain()])
    with pytest.raises(codec.UndecryptablePayload) as raised:
        await codec_for(f"k2:{K2}").decode([old])
    assert str(raised.value) == "payload encrypted with key 'k1', not configured"


@pytest.mark.parametrize("where", ["data", "key id", "same key, other id"])
async def test_an_altered_payload_is_refused(where: str) -> None:
    keys = codec_for(f"k1:{K1},k2:{K1}")
    (sealed,) = await keys.encode([plain()])
    altered = Payload()
    altered.CopyFrom(sealed)
    if where == "data":
        altered.data = sealed.data[:-1] + bytes([sealed.data[-1] ^ 1])
    else:
        # The key id is authenticated: a payload cannot be passed off as another key's,
        # not even one with the same bytes.
        altered.metadata[codec.KEY_ID] = b"k2"
    with pytest.raises(codec.UndecryptablePayload) as raised:
        await keys.decode([altered])
    message = str(raised.value)
    assert message.startswith("payload does not decrypt with key")
    assert SECRET.decode() not in message and K1 not in message


async def test_a_payload_written_before_encryption_is_read_as_it_is() -> None:
    keys = codec_for(f"k1:{K1}")
    assert await keys.decode([plain()]) == [plain()]
    empty = Payload(metadata={"encoding": b"binary/null"})
    assert await keys.decode([empty]) == [empty]


class Note(BaseModel):
    text: str


async def test_the_engines_converter_encrypts_values_and_failure_messages() -> None:
    converter = codec.data_converter(codec.PayloadKeys.parse(f"k1:{K1}"))
    (payload,) = await converter.encode([Note(text=SECRET.decode())])
    assert payload.metadata[codec.KEY_ID] == b"k1" and SECRET not in payload.data
    assert await converter.decode([payload], [Note]) == [Note(text=SECRET.decode())]

    failure = Failure()
    await converter.encode_failure(ApplicationError(SECRET.decode(), type="CODE"), failure)
    assert SECRET not in failure.SerializeToString()
    assert failure.application_failure_info.type == "CODE"
    decoded = await converter.decode_failure(failure)
    assert isinstance(decoded, ApplicationError) and decoded.message == SECRET.decode()


LONG = SECRET * 400
"""Some 20 KB that compress well, as a conversation does."""


def storage(compress_from: int | None, keys: str | None = None) -> codec.StorageCodec:
    return codec.StorageCodec(codec.PayloadKeys.parse(keys) if keys else None, compress_from)


async def test_a_payload_from_the_threshold_on_is_stored_compressed_whole() -> None:
    below, at = plain(LONG[:3999]), plain(LONG[:4000])
    threshold = at.ByteSize()
    assert below.ByteSize() == threshold - 1
    (kept, packed) = await storage(threshold).encode([below, at])
    assert kept == below
    assert dict(packed.metadata) == {"encoding": codec.COMPRESSED}
    assert len(packed.data) < threshold / 10 and b"json/plain" not in packed.data
    assert await storage(threshold).decode([kept, packed]) == [below, at]


async def test_a_payload_compression_would_not_shorten_is_stored_as_it_is() -> None:
    noise = plain(os.urandom(20_000))
    (stored,) = await storage(1).encode([noise])
    assert stored == noise


async def test_every_codec_reads_compressed_payloads_whether_it_compresses_or_not() -> None:
    (packed,) = await storage(1).encode([plain(LONG)])
    assert packed.metadata["encoding"] == codec.COMPRESSED
    assert await storage(None).decode([packed]) == [plain(LONG)]
    (written,) = await storage(None).encode([plain(LONG)])
    assert written == plain(LONG)


async def test_a_compressed_payload_is_encrypted_and_read_back_through_both() -> None:
    keys = f"k1:{K1}"
    (sealed,) = await storage(1, keys).encode([plain(LONG)])
    assert sealed.metadata["encoding"] == b"binary/encrypted"
    assert len(sealed.data) < len(LONG) / 10
    opened = codec.Encryption(codec.PayloadKeys.parse(keys)).decrypt(sealed)
    assert opened.metadata["encoding"] == codec.COMPRESSED
    assert await storage(None, keys).decode([sealed]) == [plain(LONG)]


@pytest.mark.parametrize("damage", ["not zlib", "cut short", "runs on", "a bomb"])
async def test_a_damaged_compressed_payload_is_refused_without_quoting_it(damage: str) -> None:
    whole = plain(LONG).SerializeToString()
    data = {
        "not zlib": whole,
        "cut short": zlib.compress(whole)[:-10],
        "runs on": zlib.compress(whole) + b"more",
        "a bomb": zlib.compress(bytes(codec.MAX_INFLATED_BYTES + 1), 9),
    }[damage]
    with pytest.raises(codec.DamagedPayload) as raised:
        await storage(None).decode([Payload(metadata={"encoding": codec.COMPRESSED}, data=data)])
    assert SECRET.decode() not in str(raised.value)


def test_the_threshold_is_a_positive_size(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGUI_COMPRESS_PAYLOADS_FROM", "16384")
    assert Settings().compress_payloads_from == 16384
    with pytest.raises(ValidationError):
        Settings(compress_payloads_from=0)


async def test_a_querys_answer_is_never_compressed() -> None:
    converter = codec.data_converter(None, 1)
    view = ThreadView(
        thread_id="t",
        agent="a",
        owner="o",
        status="idle",
        messages=[],
        state={"x": LONG.decode()},
        interrupts=[],
        runs=[],
        audit=[],
        memory={},
    )
    (answer, stored) = await converter.encode([view, Note(text=LONG.decode())])
    # Marked for the codec, which takes the mark off: readers get pydantic's payload.
    assert dict(answer.metadata) == {"encoding": b"json/plain"} and LONG in answer.data
    assert stored.metadata["encoding"] == codec.COMPRESSED
    assert await converter.decode([answer, stored], [ThreadView, Note]) == [
        view,
        Note(text=LONG.decode()),
    ]
