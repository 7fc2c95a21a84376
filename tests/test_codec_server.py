"""The codec server (``gateway/codec.py``) over real HTTP, on a real Temporal server: who
may use it, with which credentials, from which origins, and that it turns a thread's
encrypted history back into the conversation."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from google.protobuf import json_format
from temporalio.api.common.v1 import Payload, Payloads
from temporalio.client import Client

import codec
from gateway.codec import ACCESS_LOGGER, REDACTED
from gateway.session import SESSION_COOKIE, Sessions
from gateway.tokens import mint
from settings import Settings
from tests.browser import TEST_SESSION_SECRET
from tests.helpers import (
    TEST_SECRET,
    Stack,
    bearer,
    new_thread,
    post_run,
    run_histories,
    run_input,
    serve_gateway,
    serve_stack,
)

KEYS = f"test1:{codec.new_key()}"
"""This module's payload keys, whatever the environment's."""
ADMIN_GROUP = Settings.model_fields["auth_admin_group"].default
CODEC_GROUP = "codec-readers"
UI_ORIGIN = "http://ui.example.test"
WORD = "zanzibar"
"""A word of the conversation, to be found in the decoded history only."""


def _token(subject: str, groups: list[str]) -> str:
    return mint(TEST_SECRET, subject, groups, settings=Settings(auth_hs256_secret=TEST_SECRET))


ADMIN = bearer("root", [ADMIN_GROUP])


@pytest.fixture(scope="module")
async def keyed(client: Client) -> AsyncIterator[Stack]:
    """A worker and a gateway encrypting with :data:`KEYS`, the gateway serving the codec
    to :data:`CODEC_GROUP` and to pages of :data:`UI_ORIGIN`."""
    encrypting = Client(
        client.service_client,
        namespace=client.namespace,
        data_converter=Settings(payload_keys=KEYS).data_converter(),
    )
    async with serve_stack(
        encrypting,
        payload_keys=KEYS,
        codec_group=CODEC_GROUP,
        codec_origins=UI_ORIGIN,
        session_secret=TEST_SESSION_SECRET,
    ) as stack:
        yield stack


def _json_payload(value: Any) -> Payload:
    return Payload(metadata={"encoding": b"json/plain"}, data=json.dumps(value).encode())


def _body(*payloads: Payload) -> dict[str, Any]:
    return json_format.MessageToDict(Payloads(payloads=payloads))


def _payloads(answer: httpx.Response) -> list[Payload]:
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"] == "application/json"
    return list(json_format.ParseDict(answer.json(), Payloads()).payloads)


async def _post(
    stack: Stack, path: str, body: Any, headers: dict[str, str] | None = None
) -> httpx.Response:
    async with httpx.AsyncClient(base_url=stack.url) as http:
        headers = {"X-Namespace": "default", **(headers or {})}
        return await http.post(path, json=body, headers=headers)


async def test_an_admin_encodes_and_decodes(keyed: Stack) -> None:
    plain = _json_payload({"said": WORD})
    (sealed,) = _payloads(await _post(keyed, "/codec/encode", _body(plain), ADMIN))
    assert sealed.metadata["encoding"] == codec.ENCODING
    assert sealed.metadata[codec.KEY_ID] == b"test1"
    assert WORD.encode() not in sealed.data

    decoded = _payloads(await _post(keyed, "/codec/decode", _body(sealed, plain), ADMIN))
    assert decoded == [plain, plain]


async def test_only_admins_and_the_codec_group_may_use_it(keyed: Stack) -> None:
    body = _body(_json_payload("x"))
    anonymous = await _post(keyed, "/codec/decode", body)
    assert anonymous.status_code == 401
    assert anonymous.json()["error"]["code"] == "UNAUTHENTICATED"

    owner = await _post(keyed, "/codec/decode", body, bearer("alice", ["approvers"]))
    assert owner.status_code == 403
    assert owner.json() == {
        "error": {
            "code": "CODEC_FORBIDDEN",
            "message": "The codec server is for the admin group's and the codec group's "
            "members only.",
        }
    }
    for operation in ("decode", "encode"):
        member = await _post(keyed, f"/codec/{operation}", body, bearer("carol", [CODEC_GROUP]))
        assert len(_payloads(member)) == 1


@pytest.fixture
def access_log() -> Iterator[list[str]]:
    """The gateway's access log lines while the test runs (uvicorn's, at INFO)."""
    lines: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    logger = logging.getLogger(ACCESS_LOGGER)
    handler, level = Collect(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield lines
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


async def test_a_token_in_the_path_is_verified_as_a_bearer_token_and_never_logged(
    keyed: Stack, access_log: list[str]
) -> None:
    body = _body(_json_payload("x"))
    admin = _token("temporal-web-ui", [ADMIN_GROUP])
    member = _token("temporal-web-ui", [CODEC_GROUP])
    for token in (admin, member):
        assert len(_payloads(await _post(keyed, f"/codec/token/{token}/decode", body))) == 1

    forged = mint("another-secret-0123456789abcdef0123", "root", [ADMIN_GROUP])
    refused = await _post(keyed, f"/codec/token/{forged}/decode", body)
    assert (refused.status_code, refused.json()["error"]["code"]) == (401, "UNAUTHENTICATED")
    outsider = _token("mallory", ["approvers"])
    refused = await _post(keyed, f"/codec/token/{outsider}/encode", body)
    assert (refused.status_code, refused.json()["error"]["code"]) == (403, "CODEC_FORBIDDEN")

    codec_lines = [line for line in access_log if "/codec/token/" in line]
    assert len(codec_lines) == 4, access_log
    assert all(f"/codec/token/{REDACTED}/" in line for line in codec_lines)
    assert not [line for line in access_log if any(t in line for t in (admin, forged))]


async def test_cors_answers_the_web_uis_origin_on_the_codec_only(keyed: Stack) -> None:
    preflight = {
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type,x-namespace,authorization",
    }
    async with httpx.AsyncClient(base_url=keyed.url) as http:
        for path in ("/codec/decode", "/codec/token/a.b.c/encode"):
            allowed = await http.options(path, headers={"Origin": UI_ORIGIN, **preflight})
            assert allowed.status_code == 200, allowed.text
            assert allowed.headers["access-control-allow-origin"] == UI_ORIGIN
            assert allowed.headers["access-control-allow-credentials"] == "true"
            assert "Origin" in allowed.headers["vary"]
            allowed_headers = allowed.headers["access-control-allow-headers"].lower()
            assert {"authorization", "content-type", "x-namespace"} <= set(
                allowed_headers.replace(" ", "").split(",")
            )

        other = await http.options(
            "/codec/decode", headers={"Origin": "https://evil.example", **preflight}
        )
        assert other.status_code == 400
        assert other.json()["error"]["code"] == "CORS_REJECTED"
        assert "access-control-allow-origin" not in other.headers
        # The rest of the gateway does not answer the Web UI's origin.
        elsewhere = await http.options("/threads", headers={"Origin": UI_ORIGIN, **preflight})
        assert "access-control-allow-origin" not in elsewhere.headers

    answer = await _post(keyed, "/codec/decode", _body(), {**ADMIN, "Origin": UI_ORIGIN})
    assert answer.headers["access-control-allow-origin"] == UI_ORIGIN
    assert "Origin" in answer.headers["vary"]
    answer = await _post(
        keyed, "/codec/decode", _body(), {**ADMIN, "Origin": "https://evil.example"}
    )
    assert "access-control-allow-origin" not in answer.headers


async def test_a_session_decodes_without_its_csrf_token_and_still_needs_it_elsewhere(
    keyed: Stack,
) -> None:
    sessions = Sessions(Settings(session_secret=TEST_SESSION_SECRET))
    admin_session, _ = sessions.issue("root", [ADMIN_GROUP])
    cookies = {SESSION_COOKIE: admin_session}
    async with httpx.AsyncClient(base_url=keyed.url, cookies=cookies) as http:
        decoded = await http.post("/codec/decode", json=_body(_json_payload(WORD)))
        assert _payloads(decoded) == [_json_payload(WORD)]
        run = await http.post("/agents/demo", json=run_input(new_thread(), "r1", "hi"))
        assert (run.status_code, run.json()["error"]["code"]) == (403, "CSRF_FAILED")

    owner_session, _ = sessions.issue("alice", [])
    async with httpx.AsyncClient(
        base_url=keyed.url, cookies={SESSION_COOKIE: owner_session}
    ) as http:
        refused = await http.post("/codec/decode", json=_body())
        assert refused.json()["error"]["code"] == "CODEC_FORBIDDEN"


async def test_a_threads_history_decodes_to_the_conversation(keyed: Stack) -> None:
    thread_id = new_thread()
    await post_run(keyed.http, "demo", run_input(thread_id, "r1", f"mail a@example.com, {WORD}"))
    assert keyed.client is not None
    stored = [
        payload
        async for _, events in run_histories(keyed.client, thread_id)
        for event in events
        for payload in _all_payloads(event)
    ]
    # Temporal holds ciphertext only: the word is in no payload of the history.
    assert not [p for p in stored if WORD.encode() in p.SerializeToString()]
    encrypted = [p for p in stored if p.metadata.get("encoding") == codec.ENCODING]
    assert encrypted

    decoded = _payloads(await _post(keyed, "/codec/decode", _body(*encrypted), ADMIN))
    assert all(p.metadata["encoding"] == b"json/plain" for p in decoded)
    conversation = [p for p in decoded if WORD in p.data.decode()]
    assert conversation
    json.loads(conversation[0].data)


def _all_payloads(message: Any) -> Iterator[Payload]:
    """Every ``Payload`` in a protobuf message, however deep, in maps too."""
    if isinstance(message, Payload):
        yield message
        return
    for field, value in message.ListFields():
        if field.message_type is None:
            continue
        if field.message_type.GetOptions().map_entry:
            items = list(value.values())
        elif hasattr(value, "ListFields"):
            items = [value]
        else:
            items = list(value)
        for item in items:
            if hasattr(item, "ListFields"):
                yield from _all_payloads(item)


async def test_refusals_name_no_data(keyed: Stack) -> None:
    other_key = codec.Encryption(codec.PayloadKeys.parse(f"gone:{codec.new_key()}"))
    foreign = other_key.encrypt(_json_payload(WORD))
    answer = await _post(keyed, "/codec/decode", _body(foreign), ADMIN)
    assert answer.status_code == 422
    error = answer.json()["error"]
    assert error["code"] == "UNDECRYPTABLE_PAYLOAD" and "'gone'" in error["message"]
    assert WORD not in answer.text

    damaged = Payload(metadata={"encoding": codec.COMPRESSED}, data=WORD.encode())
    answer = await _post(keyed, "/codec/decode", _body(damaged), ADMIN)
    assert answer.status_code == 422
    assert answer.json()["error"]["code"] == "DAMAGED_PAYLOAD" and WORD not in answer.text

    for body in ({"payloads": [{"data": "not base64!"}]}, {"payloads": 3}, [WORD]):
        malformed = await _post(keyed, "/codec/decode", body, ADMIN)
        assert malformed.status_code == 400, malformed.text
        assert malformed.json()["error"]["code"] == "INVALID_PAYLOADS"
        assert WORD not in malformed.text


async def test_without_keys_payloads_pass_through_for_the_authorized_only(
    client: Client,
) -> None:
    settings = Settings(auth_hs256_secret=TEST_SECRET, payload_keys=None)
    sealed = codec.Encryption(codec.PayloadKeys.parse(KEYS)).encrypt(_json_payload(WORD))
    packed = codec.compress(_json_payload(WORD * 100), 1)
    body = _body(_json_payload(WORD), sealed, packed)
    async with serve_gateway(settings, client) as url, httpx.AsyncClient(base_url=url) as http:
        answer = await http.post("/codec/encode", json=body, headers=ADMIN)
        assert _payloads(answer) == [_json_payload(WORD), sealed, packed]
        # Only what was compressed is read back: the Web UI shows it as JSON.
        answer = await http.post("/codec/decode", json=body, headers=ADMIN)
        assert _payloads(answer) == [_json_payload(WORD), sealed, _json_payload(WORD * 100)]
        refused = await http.post("/codec/decode", json=body, headers=bearer("alice"))
        assert refused.status_code == 403
