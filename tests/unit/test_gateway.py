"""Guards the gateway's HTTP surface where it answers without Temporal: requests it
rejects up front, with their status and ``{"error": {...}}`` body, and the agent listings.

The Temporal client is a stand-in whose every call raises, which the gateway answers
as any unexpected error: a 500 ``INTERNAL`` (the test then fails on the status), with
the error logged. So a rejection here proves the request never reached Temporal.
Only ``create_app`` and the client dependency are imported from the gateway, so a
reorganisation of its routes changes one import.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, NoReturn, cast

import pytest
from fastapi.testclient import TestClient
from temporalio.client import Client

from gateway.app import create_app
from gateway.auth import AuthConfigError
from gateway.deps import _client as client_dependency
from gateway.tokens import mint
from settings import Settings
from tests.helpers import TEST_SECRET, bearer
from workflows.agents import EXAMPLES
from workflows.served import by_name

AGENTS = by_name(EXAMPLES)
"""The agents the gateway under test serves, by name."""
RUN_INPUT: dict[str, Any] = {"threadId": "t1", "runId": "r1", "messages": []}
EVENTS = "/threads/t1/runs/r1/events"
THREAD_EVENTS = "/threads/t1/events"


REACHED = "the request reached Temporal"


class NoTemporal:
    """Stands in for the Temporal client: calling anything through it raises.

    Looking a method up is allowed, since Python evaluates ``client.method`` before the
    arguments, where a request may still be checked and rejected; no call, no request.
    """

    def __init__(self, path: str = "client") -> None:
        self._path = path

    def __getattr__(self, name: str) -> NoTemporal:
        return NoTemporal(f"{self._path}.{name}")

    def __call__(self, *args: object, **kwargs: object) -> NoReturn:
        raise AssertionError(f"{REACHED}: {self._path}(...)")


@contextmanager
def gateway(**settings: Any) -> Iterator[TestClient]:
    """The gateway with these settings, with the stand-in as its client."""
    no_temporal = cast(Client, NoTemporal())

    async def client() -> Client:
        return no_temporal

    app = create_app(
        EXAMPLES, Settings(auth_hs256_secret=TEST_SECRET, **settings), client=no_temporal
    )
    app.dependency_overrides[client_dependency] = client
    with TestClient(app, headers=bearer()) as test_client:
        yield test_client


@pytest.fixture
def http() -> Iterator[TestClient]:
    """The gateway as configured by default, with the stand-in as its client."""
    with gateway() as test_client:
        yield test_client


def error_of(response: Any, status: int, code: str) -> dict[str, Any]:
    """The response's error object, once its status, shape and code are as expected."""
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"}
    error: dict[str, Any] = body["error"]
    assert error["code"] == code
    assert isinstance(error["message"], str) and error["message"]
    return error


def assert_reached_temporal(response: Any, caplog: pytest.LogCaptureFixture) -> None:
    """The request got as far as the stand-in: a 500 whose body has an error id and not
    the exception's text, which the log has."""
    error = error_of(response, 500, "INTERNAL")
    assert error["details"]["errorId"] in error["message"]
    assert REACHED not in response.text
    assert REACHED in caplog.text


# --- the stand-in itself -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "kwargs"),
    [
        ("POST", "/agents/demo", {"json": RUN_INPUT}),
        (
            "POST",
            "/agents/demo",
            {"json": {**RUN_INPUT, "resume": {"interruptId": "i1", "payload": {"x": 1}}}},
        ),
        ("GET", "/threads/t1", {}),
        ("GET", "/threads?agent=demo&status=waiting", {}),
        ("GET", "/interrupts?reason=tool_call", {}),
        ("GET", "/interrupts?role=decide", {}),
        ("GET", "/interrupts?role=mine&agent=demo", {}),
        ("GET", f"{EVENTS}?after=0", {}),
        ("GET", f"{EVENTS}?after=12", {}),
        ("GET", EVENTS, {"headers": {"Last-Event-ID": "3"}}),
        ("GET", f"{EVENTS}?after=3", {"headers": {"Last-Event-ID": "x"}}),
        ("GET", THREAD_EVENTS, {}),
        ("GET", f"{THREAD_EVENTS}?after=7", {}),
        ("GET", THREAD_EVENTS, {"headers": {"Last-Event-ID": "7"}}),
    ],
    ids=[
        "run",
        "run-with-draft-resume",
        "thread",
        "threads",
        "interrupts",
        "interrupts-to-decide",
        "interrupts-mine",
        "events-after-0",
        "events-after-12",
        "events-last-event-id",
        "after-wins-over-header",
        "thread-events",
        "thread-events-after",
        "thread-events-last-event-id",
    ],
)
def test_a_valid_request_goes_on_to_temporal(
    http: TestClient,
    caplog: pytest.LogCaptureFixture,
    method: str,
    path: str,
    kwargs: dict[str, Any],
) -> None:
    assert_reached_temporal(http.request(method, path, **kwargs), caplog)


# --- the run's input ------------------------------------------------------------------------


def test_a_body_that_is_not_json_is_malformed(http: TestClient) -> None:
    response = http.post(
        "/agents/demo", content=b"{not json", headers={"content-type": "application/json"}
    )

    error = error_of(response, 400, "MALFORMED_JSON")
    assert error["message"].startswith("The body is not valid JSON")
    assert "details" not in error


@pytest.mark.parametrize(
    ("body", "locations"),
    [
        ({"threadId": "t1"}, [["runId"], ["messages"]]),
        ([1, 2], [[]]),
        ({**RUN_INPUT, "messages": [{"id": "m1"}]}, [["messages", 0]]),
        ({**RUN_INPUT, "resume": {"payload": 1}}, [["resume", 0, "interruptId"]]),
        (
            {**RUN_INPUT, "resume": [{"interruptId": "i1", "status": "maybe"}]},
            [["resume", 0, "status"]],
        ),
    ],
    ids=["missing-fields", "not-an-object", "bad-message", "draft-resume-no-id", "bad-status"],
)
def test_a_body_that_is_not_a_run_agent_input_names_the_failing_fields(
    http: TestClient, body: Any, locations: list[list[str | int]]
) -> None:
    response = http.post("/agents/demo", json=body)

    error = error_of(response, 422, "INVALID_RUN_INPUT")
    failing = [detail["loc"] for detail in error["details"]]
    for location in locations:
        # An empty location is the body itself; any other names a field and what is inside.
        assert any(
            loc[: len(location)] == location if location else loc == [] for loc in failing
        ), failing


def test_a_run_for_an_unknown_agent_is_not_found(http: TestClient) -> None:
    error = error_of(http.post("/agents/nobody", json=RUN_INPUT), 404, "UNKNOWN_AGENT")

    assert "'nobody'" in error["message"]
    assert ", ".join(sorted(AGENTS)) in error["message"]


@pytest.mark.parametrize(
    "content_type",
    [None, "text/plain", "application/x-www-form-urlencoded", "application/json; charset=latin-1"],
    ids=["none", "text-plain", "form", "other-charset"],
)
def test_a_run_body_not_sent_as_json_is_unsupported(
    http: TestClient, content_type: str | None
) -> None:
    headers = {"content-type": content_type} if content_type else {}
    response = http.post("/agents/demo", content=json.dumps(RUN_INPUT), headers=headers)

    error_of(response, 415, "UNSUPPORTED_MEDIA_TYPE")


@pytest.mark.parametrize(
    "content_type",
    ["application/json", "Application/JSON; charset=UTF-8", 'application/json;charset="utf-8"'],
)
def test_a_json_content_type_with_parameters_is_accepted(
    http: TestClient, caplog: pytest.LogCaptureFixture, content_type: str
) -> None:
    response = http.post(
        "/agents/demo", content=json.dumps(RUN_INPUT), headers={"content-type": content_type}
    )

    assert_reached_temporal(response, caplog)


@pytest.mark.parametrize(
    "body",
    [b"[" * 200_000, b'{"a":' * 65 + b"1" + b"}" * 65, b"\xff{}"],
    ids=["200k-brackets", "65-objects", "not-utf-8"],
)
def test_a_body_too_deep_or_not_utf8_is_malformed_never_a_500(
    http: TestClient, body: bytes
) -> None:
    response = http.post("/agents/demo", content=body, headers={"content-type": "application/json"})

    error_of(response, 400, "MALFORMED_JSON")


@pytest.mark.parametrize(
    ("patch", "location"),
    [
        ({"threadId": "a/b"}, ["threadId"]),
        ({"runId": "x" * 129}, ["runId"]),
        ({"parentRunId": "."}, ["parentRunId"]),
        ({"messages": [{"id": "m 1", "role": "user", "content": "hi"}]}, ["messages", 0, "id"]),
        (
            {"messages": [{"id": "m1", "role": "tool", "toolCallId": "", "content": "x"}]},
            ["messages", 0, "toolCallId"],
        ),
        (
            {
                "messages": [
                    {
                        "id": "m1",
                        "role": "assistant",
                        "toolCalls": [
                            {
                                "id": "c?1",
                                "type": "function",
                                "function": {"name": "f", "arguments": ""},
                            }
                        ],
                    }
                ]
            },
            ["messages", 0, "toolCalls", 0, "id"],
        ),
        (
            {"resume": [{"interruptId": "int 1", "status": "cancelled"}]},
            ["resume", 0, "interruptId"],
        ),
    ],
    ids=[
        "thread",
        "run-too-long",
        "parent-run",
        "message",
        "tool-call-id",
        "tool-call",
        "interrupt",
    ],
)
def test_an_id_outside_the_rule_is_invalid_run_input_naming_it(
    http: TestClient, patch: dict[str, Any], location: list[str | int]
) -> None:
    error = error_of(
        http.post("/agents/demo", json={**RUN_INPUT, **patch}), 422, "INVALID_RUN_INPUT"
    )

    assert [detail["loc"] for detail in error["details"]] == [location]


@pytest.mark.parametrize(
    ("path", "parameter"),
    [
        ("/threads/a%20b", "thread_id"),
        (f"/threads/{'x' * 129}", "thread_id"),
        ("/threads/.x/runs/r1/events", "thread_id"),
        ("/threads/t1/runs/r%3F1/events", "run_id"),
    ],
    ids=["thread-space", "thread-too-long", "thread-leading-dot", "run-question-mark"],
)
def test_an_id_outside_the_rule_in_a_path_is_an_invalid_parameter(
    http: TestClient, path: str, parameter: str
) -> None:
    error = error_of(http.get(path), 422, "INVALID_PARAMETER")

    assert [detail["loc"] for detail in error["details"]] == [["path", parameter]]


# --- the edge: body size, hosts, CORS, unknown routes ----------------------------------------


def test_a_body_over_the_cap_is_too_large_with_or_without_a_length() -> None:
    body = json.dumps({**RUN_INPUT, "forwardedProps": {"pad": "x" * 200}}).encode()
    headers = {"content-type": "application/json"}

    def chunks() -> Iterator[bytes]:
        for start in range(0, len(body), 50):
            yield body[start : start + 50]

    with gateway(max_body_bytes=100) as small:
        error = error_of(
            small.post("/agents/demo", content=body, headers=headers), 413, "BODY_TOO_LARGE"
        )
        assert "100 bytes" in error["message"]
        error_of(
            small.post("/agents/demo", content=chunks(), headers=headers), 413, "BODY_TOO_LARGE"
        )


def test_a_host_not_allowed_is_invalid_but_healthz_answers_any(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with gateway(allowed_hosts="gateway.example.com, other.example.com") as http:
        error_of(http.get("/agents"), 400, "INVALID_HOST")
        error_of(http.get("/agents", headers={"host": "evil.example"}), 400, "INVALID_HOST")
        assert http.get("/agents", headers={"host": "Gateway.Example.com:443"}).status_code == 200
        assert_reached_temporal(http.get("/healthz", headers={"host": "10.0.0.7:8000"}), caplog)


def test_cors_answers_the_listed_origins_only() -> None:
    preflight = {
        "access-control-request-method": "POST",
        "access-control-request-headers": "authorization, content-type, last-event-id",
    }
    with gateway(cors_origins="https://app.example.com") as http:
        allowed = http.options(
            "/agents/demo", headers={"origin": "https://app.example.com", **preflight}
        )
        assert allowed.status_code == 200
        assert allowed.headers["access-control-allow-origin"] == "https://app.example.com"
        simple = http.get("/agents", headers={"origin": "https://app.example.com"})
        assert simple.headers["access-control-allow-origin"] == "https://app.example.com"
        assert "Retry-After" in simple.headers["access-control-expose-headers"]

        other = http.options(
            "/agents/demo", headers={"origin": "https://evil.example", **preflight}
        )
        error_of(other, 400, "CORS_REJECTED")
        assert "access-control-allow-origin" not in other.headers
        assert (
            "access-control-allow-origin"
            not in http.get("/agents", headers={"origin": "https://evil.example"}).headers
        )


def test_without_cors_origins_no_cors_headers_are_sent(http: TestClient) -> None:
    response = http.get("/agents", headers={"origin": "https://app.example.com"})

    assert response.status_code == 200
    assert not [name for name in response.headers if name.startswith("access-control-")]


def test_an_unknown_path_or_method_has_the_error_body(http: TestClient) -> None:
    error_of(http.get("/nowhere"), 404, "UNKNOWN_ROUTE")
    response = http.delete("/agents")
    error_of(response, 405, "METHOD_NOT_ALLOWED")
    assert response.headers["allow"] == "GET"


# --- event ids -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "headers"),
    [
        ("?after=abc", {}),
        ("?after=-1", {}),
        ("?after=1.5", {}),
        ("?after=+3", {}),
        ("?after=", {}),
        ("", {"Last-Event-ID": "abc"}),
        ("", {"Last-Event-ID": "-1"}),
        ("?after=x", {"Last-Event-ID": "3"}),
    ],
    ids=[
        "after-word",
        "after-negative",
        "after-fraction",
        "after-signed",
        "after-empty",
        "header-word",
        "header-negative",
        "bad-after-good-header",
    ],
)
@pytest.mark.parametrize("events", [EVENTS, THREAD_EVENTS], ids=["run", "thread"])
def test_an_event_id_that_is_not_a_non_negative_integer_is_invalid(
    http: TestClient, events: str, query: str, headers: dict[str, str]
) -> None:
    error_of(http.get(f"{events}{query}", headers=headers), 422, "INVALID_EVENT_ID")


@pytest.mark.parametrize("events", [EVENTS, THREAD_EVENTS], ids=["run", "thread"])
def test_a_superscript_digit_is_not_an_event_id(http: TestClient, events: str) -> None:
    error_of(http.get(f"{events}?after=²"), 422, "INVALID_EVENT_ID")


# --- listings ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "/threads?agent=nobody",
        "/interrupts?agent=nobody",
        '/interrupts?reason=x" OR WorkflowType = "Other',
        "/interrupts?reason=tool call",
    ],
    ids=["threads-unknown-agent", "inbox-unknown-agent", "inbox-quoted-reason", "inbox-spaced"],
)
def test_a_bad_filter_is_invalid(http: TestClient, path: str) -> None:
    error_of(http.get(path), 422, "INVALID_FILTER")


@pytest.mark.parametrize(
    "path",
    [
        "/threads?pageToken=abc",
        "/threads?pageToken=cGFnZS0y",
        "/interrupts?cursor=abc",
        "/interrupts?cursor=bm90IGpzb24=",
    ],
    ids=["token-not-base64", "token-without-check", "cursor-not-base64", "cursor-not-json"],
)
def test_a_page_token_or_cursor_not_handed_out_is_invalid(http: TestClient, path: str) -> None:
    error_of(http.get(path), 422, "INVALID_CURSOR")


@pytest.mark.parametrize(
    "path",
    [
        "/threads?status=bogus",
        "/threads?pageSize=0",
        "/interrupts?limit=5000",
        "/interrupts?role=x",
    ],
    ids=["status", "page-size", "limit", "role"],
)
def test_a_query_parameter_out_of_range_has_the_error_body(http: TestClient, path: str) -> None:
    response = http.get(path)

    assert response.status_code == 422
    assert set(response.json()) == {"error"}


# --- agents --------------------------------------------------------------------------------


def test_the_agents_are_listed_with_their_capabilities(http: TestClient) -> None:
    response = http.get("/agents")

    assert response.status_code == 200
    assert response.json() == {
        "agents": [
            {
                "name": name,
                "description": agent.description,
                "capabilities": agent.capabilities().model_dump(mode="json", by_alias=True),
            }
            for name, agent in AGENTS.items()
        ]
    }
    assert {"demo", "files", "transfer", "clarify"} <= set(AGENTS)


@pytest.mark.parametrize("name", sorted(AGENTS))
def test_an_agents_capabilities_are_its_own(http: TestClient, name: str) -> None:
    response = http.get(f"/agents/{name}/capabilities")

    assert response.status_code == 200
    assert response.json() == AGENTS[name].capabilities().model_dump(mode="json", by_alias=True)
    assert response.json()["identity"]["name"] == name


def test_the_capabilities_of_an_unknown_agent_are_not_found(http: TestClient) -> None:
    error = error_of(http.get("/agents/nobody/capabilities"), 404, "UNKNOWN_AGENT")

    assert "'nobody'" in error["message"]


# --- who is asking --------------------------------------------------------------------------


def routes(http: TestClient) -> list[tuple[str, str]]:
    """Every route of the gateway, as its OpenAPI document lists them, with the path
    parameters filled in."""
    found = []
    for path, operations in http.get("/openapi.json").json()["paths"].items():
        filled = path.replace("{agent_id}", "demo").replace("{thread_id}", "t1")
        filled = filled.replace("{run_id}", "r1").replace("{interrupt_id}", "i1")
        # The codec server's token-in-path form: the path's token is the credential.
        filled = filled.replace("{operation}", "decode").replace("{token}", "not-a-jwt")
        found += [(method.upper(), filled) for method in operations]
    return [*found, ("GET", "/openapi.json")]


def test_every_route_but_healthz_is_listed_here(http: TestClient) -> None:
    assert {path for _, path in routes(http)} == {
        "/agents",
        "/agents/demo",
        "/agents/demo/capabilities",
        "/threads",
        "/threads/t1",
        "/threads/t1/runs/r1/events",
        "/threads/t1/events",
        "/threads/t1/interrupts/i1",
        "/threads/t1/interrupts/i1/decisions",
        "/interrupts",
        "/metrics",
        "/codec/decode",
        "/codec/token/not-a-jwt/decode",
        "/healthz",
        "/openapi.json",
    }


@pytest.mark.parametrize(
    "headers",
    [
        {"Authorization": ""},
        {"Authorization": "Basic YWxpY2U6cHc="},
        {"Authorization": "Bearer"},
        {"Authorization": "Bearer not-a-jwt"},
        {"Authorization": bearer()["Authorization"] + "x"},
        {"Authorization": "Bearer " + mint("not-the-secret-0123456789abcdef0", "alice")},
    ],
    ids=["none", "basic", "no-token", "garbage", "bad-signature", "other-secret"],
)
def test_every_route_but_healthz_needs_a_valid_token_before_anything_else(
    http: TestClient, headers: dict[str, str]
) -> None:
    for method, path in routes(http):
        if path == "/healthz":
            continue
        # The body is not even a run: the token is checked first, and nothing reaches
        # Temporal (the stand-in would fail the test).
        response = http.request(method, path, headers=headers, content=b"{")
        error_of(response, 401, "UNAUTHENTICATED")
        assert response.headers["WWW-Authenticate"].startswith("Bearer")


def test_healthz_needs_no_token(http: TestClient, caplog: pytest.LogCaptureFixture) -> None:
    assert_reached_temporal(http.get("/healthz", headers={"Authorization": ""}), caplog)


def test_a_gateway_with_no_way_to_verify_tokens_does_not_start() -> None:
    with pytest.raises(AuthConfigError):
        create_app(EXAMPLES, Settings(auth_hs256_secret=None))
