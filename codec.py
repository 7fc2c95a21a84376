"""What the engine does to what it stores in Temporal: a payload codec that compresses
large payloads (zlib) and encrypts them all (AES-256-GCM), each when configured.

Everything a thread holds passes through Temporal as payloads: workflow and activity
arguments and results, updates, queries' answers, the memo and the plain-words details
the Web UI shows, and (with the failure converter :func:`data_converter` sets) error
messages. With ``AGUI_PAYLOAD_KEYS`` set, every client of the engine (worker, gateway,
bench, tests, and the Web UI and ``temporal`` CLI through the codec server at
``/codec``) encrypts each payload before Temporal sees it, so its history and
visibility store hold ciphertext; only search attributes and ids stay plaintext
(``docs/operations.md``, "Encrypting thread data").

Keys rotate without a migration: each encrypted payload names the id of the key that
encrypted it, the first key configured encrypts, and every key configured decrypts.
A payload the codec did not encrypt (written before encryption was enabled) is read
as it is.

With ``AGUI_COMPRESS_PAYLOADS_FROM`` set, a payload of at least that many bytes is
compressed before it is encrypted. Much of what a long thread stores is its
conversation, once in each model call's input and twice at each continue-as-new (the
``ContinuedAsNew`` event and the next run's start), and text compresses several times
over. Every process reads compressed payloads, set or not: compression is turned on
only once every process of a deployment runs code that reads them (``docs/operations.md``,
"Compressing large payloads").
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import os
import re
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from temporalio.api.common.v1 import Payload
from temporalio.contrib.pydantic import PydanticPayloadConverter, pydantic_data_converter
from temporalio.converter import (
    DataConverter,
    DefaultFailureConverterWithEncodedAttributes,
    PayloadCodec,
)

from workflows.wire import QueryAnswer

ENCODING = b"binary/encrypted"
"""The ``encoding`` metadata of an encrypted payload."""
KEY_ID = "encryption-key-id"
"""The metadata naming the key that encrypted a payload."""
KEY_BYTES = 32
NONCE_BYTES = 12
KEY_ID_RULE = re.compile(r"[A-Za-z0-9_.-]{1,64}")
COMPRESSED = b"binary/zlib"
"""The ``encoding`` metadata of a compressed payload."""
COMPRESSION_LEVEL = 6
"""zlib's default level: for the conversation a thread carries, about an eighth smaller
than its fastest, for twice its CPU, which a payload this large costs once per
continue-as-new or model call (``docs/bench.md``, "Compressing large payloads")."""
ANSWER = "agui-query-answer"
"""The metadata with which :class:`PayloadConverter` marks a query's answer for
:class:`StorageCodec`, which leaves the answer uncompressed (Temporal never stores it)
and takes the mark off, so that readers (the ``temporal`` CLI among them) get the
payload as pydantic's converter writes it."""
MAX_INFLATED_BYTES = 64 * 1024 * 1024
"""The most a compressed payload may inflate to, far past what the engine's budgets let
any payload hold: a payload that claims more is refused before it fills memory."""


class PayloadKeysError(ValueError):
    """``AGUI_PAYLOAD_KEYS`` is malformed. The message never includes key material."""


class UndecryptablePayload(ValueError):
    """An encrypted payload no configured key decrypts: its key is not configured, or the
    payload was altered. The message names the key id, never the data."""


class DamagedPayload(ValueError):
    """A compressed payload that does not inflate, or would inflate past
    :data:`MAX_INFLATED_BYTES`. The message never quotes the data."""


@dataclass(frozen=True)
class PayloadKeys:
    """The configured keys: the first encrypts, all decrypt."""

    active: str
    """The id of the key that encrypts."""
    keys: Mapping[str, bytes]
    """Every key by id, the active one included."""

    @classmethod
    def parse(cls, text: str) -> PayloadKeys:
        """Keys from ``"<id>:<base64 of 32 bytes>,<id>:<...>"``, the active one first."""
        keys: dict[str, bytes] = {}
        for number, item in enumerate((part.strip() for part in text.split(",")), start=1):
            key_id, colon, encoded = item.partition(":")
            if not colon or not KEY_ID_RULE.fullmatch(key_id):
                raise PayloadKeysError(
                    f"key #{number} is not '<id>:<base64 key>' with an id of letters, digits, "
                    "'.', '_' or '-'"
                )
            if key_id in keys:
                raise PayloadKeysError(f"key id {key_id!r} is given twice")
            try:
                key = base64.b64decode(encoded.strip(), validate=True)
            except binascii.Error:
                raise PayloadKeysError(f"key {key_id!r} is not valid base64") from None
            if len(key) != KEY_BYTES:
                raise PayloadKeysError(
                    f"key {key_id!r} is {len(key)} bytes; AES-256 needs {KEY_BYTES}"
                )
            keys[key_id] = key
        return cls(active=next(iter(keys)), keys=keys)


def new_key() -> str:
    """A fresh random key, base64-encoded, for ``AGUI_PAYLOAD_KEYS``."""
    return base64.b64encode(os.urandom(KEY_BYTES)).decode()


class Encryption:
    """AES-256-GCM over each whole serialized payload, its metadata included (so the
    encoding and the type of what is stored are hidden too). The key id is the
    associated data: a payload cannot be passed off as another key's."""

    def __init__(self, keys: PayloadKeys) -> None:
        self._active = keys.active
        self._ciphers = {key_id: AESGCM(key) for key_id, key in keys.keys.items()}

    def encrypt(self, payload: Payload) -> Payload:
        """``payload``, encrypted with the active key."""
        nonce = os.urandom(NONCE_BYTES)
        key_id = self._active.encode()
        sealed = self._ciphers[self._active].encrypt(nonce, payload.SerializeToString(), key_id)
        return Payload(metadata={"encoding": ENCODING, KEY_ID: key_id}, data=nonce + sealed)

    def decrypt(self, payload: Payload) -> Payload:
        """``payload`` decrypted; as it is when it is not encrypted."""
        if payload.metadata.get("encoding") != ENCODING:
            return payload
        key_id = payload.metadata.get(KEY_ID, b"").decode(errors="replace")
        cipher = self._ciphers.get(key_id)
        if cipher is None:
            raise UndecryptablePayload(f"payload encrypted with key {key_id!r}, not configured")
        nonce, sealed = payload.data[:NONCE_BYTES], payload.data[NONCE_BYTES:]
        try:
            plain = cipher.decrypt(nonce, sealed, key_id.encode())
        except InvalidTag:
            raise UndecryptablePayload(f"payload does not decrypt with key {key_id!r}") from None
        return Payload.FromString(plain)


class PayloadConverter(PydanticPayloadConverter):
    """pydantic's payload converter, marking each query's answer
    (``workflows.wire.QueryAnswer``) with :data:`ANSWER`: compressing a long thread's
    view or a page of its log would cost the worker CPU at every read and save nothing,
    as Temporal never stores it."""

    def to_payloads(self, values: Sequence[Any]) -> list[Payload]:
        payloads = super().to_payloads(values)
        for value, payload in zip(values, payloads, strict=True):
            if isinstance(value, QueryAnswer):
                payload.metadata[ANSWER] = b"1"
        return payloads


def compress(payload: Payload, from_bytes: int) -> Payload:
    """``payload`` compressed whole, its metadata included, if it is at least
    ``from_bytes`` long and compressing makes it shorter; else as it is."""
    if payload.ByteSize() < from_bytes:
        return payload
    whole = payload.SerializeToString()
    packed = zlib.compress(whole, COMPRESSION_LEVEL)
    if len(packed) >= len(whole):
        return payload
    return Payload(metadata={"encoding": COMPRESSED}, data=packed)


def inflate(payload: Payload) -> Payload:
    """``payload`` inflated; as it is when it is not compressed."""
    if payload.metadata.get("encoding") != COMPRESSED:
        return payload
    inflater = zlib.decompressobj()
    try:
        whole = inflater.decompress(payload.data, MAX_INFLATED_BYTES)
    except zlib.error:
        raise DamagedPayload("compressed payload does not inflate") from None
    if not inflater.eof or inflater.unused_data:
        raise DamagedPayload(
            f"compressed payload is cut short, runs on, or inflates past {MAX_INFLATED_BYTES} bytes"
        )
    return Payload.FromString(whole)


class StorageCodec(PayloadCodec):
    """The engine's codec: a payload on its way to Temporal is compressed when it is at
    least ``compress_from`` bytes long and no query's answer (:data:`ANSWER`), then
    encrypted when there are ``keys``; on its way back, decrypted and inflated,
    whichever of the two it went through."""

    def __init__(self, keys: PayloadKeys | None, compress_from: int | None) -> None:
        self._encryption = Encryption(keys) if keys is not None else None
        self._compress_from = compress_from

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self._stored(payload) for payload in payloads]

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self._read(payload) for payload in payloads]

    def _stored(self, payload: Payload) -> Payload:
        if ANSWER in payload.metadata:
            del payload.metadata[ANSWER]
        elif self._compress_from is not None:
            payload = compress(payload, self._compress_from)
        if self._encryption is not None:
            payload = self._encryption.encrypt(payload)
        return payload

    def _read(self, payload: Payload) -> Payload:
        if self._encryption is not None:
            payload = self._encryption.decrypt(payload)
        return inflate(payload)


def data_converter(keys: PayloadKeys | None, compress_from: int | None = None) -> DataConverter:
    """The engine's one data converter: pydantic's, with :class:`PayloadConverter` and
    :class:`StorageCodec`.

    With keys, failures' messages and stack traces are encoded too (Temporal otherwise
    keeps them plaintext), since an error may quote what a thread holds.
    """
    return dataclasses.replace(
        pydantic_data_converter,
        payload_converter_class=PayloadConverter,
        payload_codec=StorageCodec(keys, compress_from),
        failure_converter_class=(
            DefaultFailureConverterWithEncodedAttributes
            if keys is not None
            else pydantic_data_converter.failure_converter_class
        ),
    )
