"""The gateway's limits and error mapping as pure functions: JSON depth, the id rule,
the per-principal stream slots, and what a failed Temporal call tells the client."""

from __future__ import annotations

import json
import logging
import uuid

import pytest
from ag_ui.core import RunAgentInput
from hypothesis import given
from hypothesis import strategies as st
from temporalio.api.common.v1 import GrpcStatus
from temporalio.api.enums.v1 import ResourceExhaustedCause, ResourceExhaustedScope
from temporalio.api.errordetails.v1 import ResourceExhaustedFailure, WorkflowNotReadyFailure
from temporalio.client import WorkflowQueryFailedError, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError, CancelledError
from temporalio.service import RPCError, RPCStatusCode

from gateway.edge import host_name
from gateway.errors import (
    ApiError,
    NotAccepted,
    decision_rejection,
    run_error_from,
    temporal_error,
)
from gateway.limits import MAX_JSON_DEPTH, StreamSlots, id_problems, parse_json, valid_id
from gateway.sent_messages import SentMessages
from gateway.streaming import run_key_for
from workflows import known_state
from workflows.errors import ErrorCode

SECRET_TEXT = "dial tcp temporal.internal:7233 via https://user:hunter2@proxy"
"""Stands for what Temporal's and gRPC's messages may carry: never shown to a client."""

# --- JSON depth ----------------------------------------------------------------------------


def nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def nested_lists(depth: int) -> list[object]:
    value: list[object] = []
    for _ in range(depth - 1):
        value = [value]
    return value


@pytest.mark.parametrize(
    "body",
    [
        b"[" * 200_000,
        nested(MAX_JSON_DEPTH + 1),
        ('{"a":' * (MAX_JSON_DEPTH + 1) + "1" + "}" * (MAX_JSON_DEPTH + 1)).encode(),
        b"[" * 100 + b"]" * 99,
    ],
    ids=["200k-open", "one-too-deep", "objects-too-deep", "unclosed"],
)
def test_json_nested_too_deeply_is_refused_before_parsing(body: bytes) -> None:
    with pytest.raises(ValueError, match="nest deeper than 64 levels"):
        parse_json(body)


@pytest.mark.parametrize(
    ("body", "value"),
    [
        (nested(MAX_JSON_DEPTH), nested_lists(MAX_JSON_DEPTH)),
        (b'{"a": "[[[[{{{{", "b": ["\\"]["]}', {"a": "[[[[{{{{", "b": ['"][']}),
        ('\ufeff{"é": "ü"}'.encode(), {"é": "ü"}),
        (b'["\\ud83d\\ude00", 1e308]', ["\U0001f600", 1e308]),
    ],
    ids=["at-the-limit", "brackets-in-strings", "utf-8-with-bom", "surrogate-pair"],
)
def test_json_within_the_limit_parses(body: bytes, value: object) -> None:
    assert parse_json(body) == value


TRICKY_TEXT = st.text(alphabet='[]{}"\\/ab\n', max_size=8)
"""Strings of brackets, quotes and backslashes: what the depth scan must see past."""
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | TRICKY_TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TRICKY_TEXT, inner, max_size=3),
    max_leaves=12,
)


def depth(value: object) -> int:
    if isinstance(value, list):
        return 1 + max(map(depth, value), default=0)
    if isinstance(value, dict):
        return 1 + max(map(depth, value.values()), default=0)
    return 0


@given(JSON_VALUES, st.integers(min_value=0, max_value=MAX_JSON_DEPTH + 2))
def test_json_is_refused_exactly_when_it_nests_too_deeply(value: object, wrappers: int) -> None:
    for _ in range(wrappers):
        value = [value]
    body = json.dumps(value).encode()
    if depth(value) > MAX_JSON_DEPTH:
        with pytest.raises(ValueError, match="nest deeper than 64 levels"):
            parse_json(body)
    else:
        assert parse_json(body) == value


@pytest.mark.parametrize(
    "body",
    [
        b'"abc',
        b'"a\\"' * 100_000,
        b"\xff\xfe[]",
        '["x"]'.encode("utf-16"),
        b"[NaN]",
        b'{"a": -Infinity}',
        b"1e999999",
        b'{"id": "\\ud800"}',
        b'["\\udc00\\ud800"]',
        b'["ok", "\\uDBFF"]',
    ],
    ids=[
        "unterminated",
        "escaped-quotes",
        "not-utf-8",
        "utf-16",
        "nan",
        "infinity",
        "overflowing-number",
        "lone-surrogate",
        "reversed-surrogates",
        "lone-surrogate-upper-case",
    ],
)
def test_json_that_is_not_utf8_json_is_a_value_error(body: bytes) -> None:
    with pytest.raises(ValueError):
        parse_json(body)


# --- run keys ------------------------------------------------------------------------------


def keyed(body: dict[str, object], principal: str = "alice") -> str:
    run_input = RunAgentInput.model_validate(body)
    state = known_state.digest(run_input.state)
    return run_key_for(run_input, principal, SentMessages(run_input.messages).digests, state)


def test_a_run_key_is_the_same_for_the_same_request_and_differs_for_any_other() -> None:
    messages = [{"id": "m1", "role": "user", "content": "hi"}]
    body = {"threadId": "t", "runId": "r", "messages": messages, "state": {"a": 1, "b": 2}}
    key = keyed(body)
    assert key.startswith("r:")
    # Key order in the state is not a different request.
    assert keyed({**body, "state": {"b": 2, "a": 1}}) == key
    others = [
        keyed(body, "bob"),
        keyed({**body, "messages": [{**messages[0], "content": "hi!"}]}),
        keyed({**body, "messages": [*messages, {"id": "m2", "role": "user", "content": "x"}]}),
        keyed({**body, "state": {"a": 1}}),
        keyed({**body, "state": {}}),
        keyed({**body, "state": None}),
        keyed({**body, "runId": "r2"}),
    ]
    assert key not in others
    assert len(set(others)) == len(others)


# --- ids -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        str(uuid.uuid4()),
        uuid.uuid4().hex,
        "call_Xk2mV9b0QeLr7TnY4pZ1s3Aw",
        f"int-{uuid.uuid4()}",
        f"operator-{uuid.uuid4()}",
        f"expiry-{uuid.uuid4()}",
        f"tc-{uuid.uuid4()}",
        "V1StGXR8_Z5jdHi6B-myT",
        "-leading-dash",
        "a._:@-z",
        "x" * 128,
    ],
    # Fixed names, though the values are new each run: parallel workers collect alike.
    ids=[
        *("uuid", "uuid-hex", "openai", "interrupt", "operator", "expiry", "tool-call"),
        *("nanoid", "leading-dash", "punctuation", "longest"),
    ],
)
def test_ids_clients_and_the_thread_make_are_valid(value: str) -> None:
    assert valid_id(value)


@pytest.mark.parametrize(
    "value",
    ["", ".", "..", ".hidden", "x" * 129, "a/b", "a b", "a?b", "a#b", "a%2Fb", "é", "a\n"],
)
def test_ids_outside_the_rule_are_invalid(value: str) -> None:
    assert not valid_id(value)


def test_id_problems_name_every_bad_id_by_its_place_in_the_body() -> None:
    run_input = RunAgentInput.model_validate(
        {
            "threadId": "t/1",
            "runId": "r 1",
            "parentRunId": "..",
            "messages": [
                {"id": "m1", "role": "user", "content": "hi"},
                {
                    "id": "m 2",
                    "role": "assistant",
                    "toolCalls": [
                        {
                            "id": "call#1",
                            "type": "function",
                            "function": {"name": "f", "arguments": "{}"},
                        }
                    ],
                },
                {"id": "m3", "role": "tool", "toolCallId": "call#1", "content": "ok"},
            ],
            "resume": [{"interruptId": "int/1", "status": "cancelled"}],
            "state": {},
            "tools": [],
            "context": [],
            "forwardedProps": {},
        }
    )

    assert [problem["loc"] for problem in id_problems(run_input)] == [
        ["threadId"],
        ["runId"],
        ["parentRunId"],
        ["messages", 1, "id"],
        ["messages", 1, "toolCalls", 0, "id"],
        ["messages", 2, "toolCallId"],
        ["resume", 0, "interruptId"],
    ]
    # Messages checked before (kept by the gateway's SentMessageCache) are not again.
    assert [problem["loc"] for problem in id_problems(run_input, checked={1})] == [
        ["threadId"],
        ["runId"],
        ["parentRunId"],
        ["messages", 2, "toolCallId"],
        ["resume", 0, "interruptId"],
    ]


# --- stream slots --------------------------------------------------------------------------


def test_a_principal_holds_at_most_its_slots_and_gets_them_back() -> None:
    slots = StreamSlots(2)
    with slots.hold("alice"), slots.hold("alice"):
        with pytest.raises(ApiError) as refused, slots.hold("alice"):
            pass
        assert refused.value.status == 429
        assert refused.value.headers == {"Retry-After": "1"}
        with slots.hold("bob"):
            assert slots.open("bob") == 1
    assert slots.open("alice") == 0
    with pytest.raises(RuntimeError), slots.hold("alice"):
        raise RuntimeError("a stream that fails gives its slot back too")
    assert slots.open("alice") == 0


# --- what a failed Temporal call tells the client ------------------------------------------


def rpc_error(status: RPCStatusCode, scope: int | None = None, not_ready: bool = False) -> RPCError:
    grpc_status = GrpcStatus(code=int(status), message=SECRET_TEXT)
    if not_ready:
        grpc_status.details.add().Pack(WorkflowNotReadyFailure())
    if scope is not None:
        grpc_status.details.add().Pack(
            ResourceExhaustedFailure(
                cause=ResourceExhaustedCause.RESOURCE_EXHAUSTED_CAUSE_RPS_LIMIT, scope=scope
            )
        )
    return RPCError(SECRET_TEXT, status, grpc_status.SerializeToString())


NAMESPACE = ResourceExhaustedScope.RESOURCE_EXHAUSTED_SCOPE_NAMESPACE
SYSTEM = ResourceExhaustedScope.RESOURCE_EXHAUSTED_SCOPE_SYSTEM


@pytest.mark.parametrize(
    ("err", "sent_input", "status", "code"),
    [
        (rpc_error(RPCStatusCode.UNAVAILABLE), False, 503, "TEMPORAL_UNAVAILABLE"),
        (rpc_error(RPCStatusCode.DEADLINE_EXCEEDED), True, 503, "TEMPORAL_UNAVAILABLE"),
        (RuntimeError(SECRET_TEXT), True, 503, "TEMPORAL_UNAVAILABLE"),
        (rpc_error(RPCStatusCode.RESOURCE_EXHAUSTED, SYSTEM), True, 503, "TEMPORAL_UNAVAILABLE"),
        (rpc_error(RPCStatusCode.RESOURCE_EXHAUSTED, NAMESPACE), True, 429, "TOO_MANY_REQUESTS"),
        (rpc_error(RPCStatusCode.RESOURCE_EXHAUSTED), True, 413, "INPUT_TOO_LARGE"),
        (rpc_error(RPCStatusCode.INVALID_ARGUMENT), True, 413, "INPUT_TOO_LARGE"),
        (rpc_error(RPCStatusCode.RESOURCE_EXHAUSTED), False, 500, "INTERNAL"),
        (rpc_error(RPCStatusCode.INVALID_ARGUMENT), False, 500, "INTERNAL"),
        (rpc_error(RPCStatusCode.PERMISSION_DENIED), True, 500, "INTERNAL"),
        (rpc_error(RPCStatusCode.FAILED_PRECONDITION), True, 500, "INTERNAL"),
        (
            rpc_error(RPCStatusCode.FAILED_PRECONDITION, not_ready=True),
            False,
            503,
            "THREAD_UNAVAILABLE",
        ),
        (WorkflowQueryFailedError(SECRET_TEXT), False, 503, "THREAD_UNAVAILABLE"),
        (
            RPCError(
                f"no poller seen for task queue recently, worker may be down; {SECRET_TEXT}",
                RPCStatusCode.FAILED_PRECONDITION,
                b"",
            ),
            False,
            503,
            "THREAD_UNAVAILABLE",
        ),
        (NotAccepted(SECRET_TEXT), True, 503, "THREAD_UNAVAILABLE"),
        (ValueError(SECRET_TEXT), False, 500, "INTERNAL"),
    ],
    ids=[
        "unavailable",
        "deadline",
        "cannot-connect",
        "cluster-overloaded",
        "namespace-rate-limit",
        "grpc-message-too-large",
        "invalid-argument-on-a-run",
        "grpc-limit-on-a-read",
        "invalid-argument-on-a-read",
        "permission-denied",
        "failed-precondition",
        "workflow-task-failing",
        "query-failing",
        "no-worker",
        "not-accepted",
        "a-bug",
    ],
)
def test_a_failed_temporal_call_is_told_by_code_and_error_id_and_logged(
    caplog: pytest.LogCaptureFixture,
    err: Exception,
    sent_input: bool,
    status: int,
    code: str,
) -> None:
    caplog.set_level(logging.WARNING, logger="gateway.errors")

    error = temporal_error(err, sent_input=sent_input)

    assert (error.status, error.code.value) == (status, code)
    error_id = error.details["errorId"]
    assert error_id in error.message
    assert "hunter2" not in error.message and "temporal.internal" not in error.message
    assert error_id in caplog.text and SECRET_TEXT in caplog.text
    retry = {"Retry-After": "1"} if status in (429, 503) else None
    assert error.headers == retry


def test_a_rejection_keeps_the_workflows_stable_code_and_message() -> None:
    cause = ApplicationError("The resume leaves int-1 unanswered.", type="INCOMPLETE_RESUME")

    event = run_error_from(WorkflowUpdateFailedError(cause))

    assert (event.code, event.message) == (ErrorCode.INCOMPLETE_RESUME, cause.message)


@pytest.mark.parametrize(
    "cause",
    [
        CancelledError(SECRET_TEXT),
        ApplicationError(SECRET_TEXT, type="KeyError"),
        ApplicationError(SECRET_TEXT),
    ],
    ids=["not-an-application-error", "a-bugs-exception", "untyped"],
)
def test_any_other_update_failure_is_internal_without_its_text(
    caplog: pytest.LogCaptureFixture, cause: BaseException
) -> None:
    event = run_error_from(WorkflowUpdateFailedError(cause))

    assert event.code == "INTERNAL"
    assert SECRET_TEXT not in event.message
    assert SECRET_TEXT in caplog.text


@pytest.mark.parametrize(
    ("code", "status"),
    [
        (ErrorCode.NOT_AN_APPROVER, 403),
        (ErrorCode.UNKNOWN_INTERRUPT, 404),
        (ErrorCode.INTERRUPT_EXPIRED, 409),
        (ErrorCode.INTERRUPT_ALREADY_ANSWERED, 409),
        (ErrorCode.INPUT_TOO_LARGE, 413),
        (ErrorCode.POLICY_EXCEEDED, 422),
        (ErrorCode.INVALID_PAYLOAD, 422),
    ],
)
def test_a_rejected_decision_keeps_its_code_with_its_status(code: ErrorCode, status: int) -> None:
    cause = ApplicationError("Not yours to decide.", type=code.value)

    error = decision_rejection(WorkflowUpdateFailedError(cause))

    assert (error.status, error.code, error.message) == (status, code, cause.message)


def test_a_decision_failing_otherwise_is_internal_without_its_text(
    caplog: pytest.LogCaptureFixture,
) -> None:
    error = decision_rejection(WorkflowUpdateFailedError(ApplicationError(SECRET_TEXT, type="X")))

    assert (error.status, error.code) == (500, "INTERNAL")
    assert SECRET_TEXT not in error.message and SECRET_TEXT in caplog.text


def test_a_run_broken_off_by_temporal_says_so_without_its_text() -> None:
    event = run_error_from(rpc_error(RPCStatusCode.UNAVAILABLE))

    assert event.code == "TEMPORAL_UNAVAILABLE"
    assert SECRET_TEXT not in event.message


@pytest.mark.parametrize(
    ("header", "name"),
    [
        ("gateway.example.com", "gateway.example.com"),
        ("Gateway.Example.COM:8443", "gateway.example.com"),
        ("gateway.example.com.", "gateway.example.com"),
        ("[::1]:8000", "[::1]"),
        ("127.0.0.1:8000", "127.0.0.1"),
        ("", ""),
    ],
)
def test_a_host_header_is_compared_by_its_name(header: str, name: str) -> None:
    assert host_name(header) == name
