"""Guards the gateway's HTTP surface where it answers without Temporal: requests it
rejects up front, with their status and ``{"error": {...}}`` body, and the agent listings.

The Temporal client is a stand-in whose every call fails the test, so a rejection here
proves the request never reached Temporal. Only ``create_app`` and the client dependency
are imported from the gateway, so a reorganisation of its routes changes one import.
"""

from __future__ import annotations

from collections.abc import Iterator
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


class NoTemporal:
    """Stands in for the Temporal client: calling anything through it fails the test.

    Looking a method up is allowed, since Python evaluates ``client.method`` before the
    arguments, where a request may still be checked and rejected; no call, no request.
    """

    def __init__(self, path: str = "client") -> None:
        self._path = path

    def __getattr__(self, name: str) -> NoTemporal:
        return NoTemporal(f"{self._path}.{name}")

    def __call__(self, *args: object, **kwargs: object) -> NoReturn:
        raise AssertionError(f"the request reached Temporal: {self._path}(...)")


@pytest.fixture
def http() -> Iterator[TestClient]:
    """The gateway, with the stand-in as its client; server errors raise in the test."""
    no_temporal = cast(Client, NoTemporal())

    async def client() -> Client:
        return no_temporal

    app = create_app(EXAMPLES, Settings(auth_hs256_secret=TEST_SECRET), client=no_temporal)
    app.dependency_overrides[client_dependency] = client
    with TestClient(app, headers=bearer()) as test_client:
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
        ("GET", f"{EVENTS}?after=0", {}),
        ("GET", f"{EVENTS}?after=12", {}),
        ("GET", EVENTS, {"headers": {"Last-Event-ID": "3"}}),
        ("GET", f"{EVENTS}?after=3", {"headers": {"Last-Event-ID": "x"}}),
    ],
    ids=[
        "run",
        "run-with-draft-resume",
        "thread",
        "threads",
        "interrupts",
        "events-after-0",
        "events-after-12",
        "events-last-event-id",
        "after-wins-over-header",
    ],
)
def test_a_valid_request_goes_on_to_temporal_and_fails_the_test_there(
    http: TestClient, method: str, path: str, kwargs: dict[str, Any]
) -> None:
    with pytest.raises(AssertionError, match="the request reached Temporal"):
        http.request(method, path, **kwargs)


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
def test_an_event_id_that_is_not_a_non_negative_integer_is_invalid(
    http: TestClient, query: str, headers: dict[str, str]
) -> None:
    error_of(http.get(f"{EVENTS}{query}", headers=headers), 422, "INVALID_EVENT_ID")


def test_a_superscript_digit_is_not_an_event_id(http: TestClient) -> None:
    error_of(http.get(f"{EVENTS}?after=²"), 422, "INVALID_EVENT_ID")


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
    ["/threads?status=bogus", "/threads?pageSize=0", "/interrupts?limit=5000"],
    ids=["status", "page-size", "limit"],
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
        found += [(method.upper(), filled.replace("{run_id}", "r1")) for method in operations]
    return [*found, ("GET", "/openapi.json")]


def test_every_route_but_healthz_is_listed_here(http: TestClient) -> None:
    assert {path for _, path in routes(http)} == {
        "/agents",
        "/agents/demo",
        "/agents/demo/capabilities",
        "/threads",
        "/threads/t1",
        "/threads/t1/runs/r1/events",
        "/interrupts",
        "/metrics",
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


def test_healthz_needs_no_token(http: TestClient) -> None:
    with pytest.raises(AssertionError, match="the request reached Temporal"):
        http.get("/healthz", headers={"Authorization": ""})


def test_a_gateway_with_no_way_to_verify_tokens_does_not_start() -> None:
    with pytest.raises(AuthConfigError):
        create_app(EXAMPLES, Settings(auth_hs256_secret=None))
