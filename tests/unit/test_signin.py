"""The sign-in's rules that need no provider: where ``next`` may lead, and the settings
a gateway refuses or warns about at start."""

from __future__ import annotations

import pytest

from gateway.app import EPHEMERAL_SESSIONS_WARNING, create_app
from gateway.auth import AuthConfigError
from gateway.signin import safe_next
from settings import Settings
from tests.helpers import TEST_SECRET
from workflows.agents import EXAMPLES


@pytest.mark.parametrize(
    "value",
    ["/inbox", "/inbox/", "/inbox/threads/t-1", "/inbox?filter=finance", "/inbox#i-1"],
)
def test_next_may_be_any_path_of_the_inbox(value: str) -> None:
    assert safe_next(value) == value


@pytest.mark.parametrize(
    "value",
    [
        None,
        "",
        "/",
        "/threads",
        "/inboxes",
        "inbox",
        "//evil.example",
        "/inbox//evil.example",
        "/inbox/\\evil.example",
        "https://evil.example/inbox",
        "javascript:alert(1)",
        "/inbox/\r\nSet-Cookie: x=y",
        "/inbox/ space",
        "/inbox/" + "a" * 2048,
    ],
)
def test_next_anywhere_else_is_the_inbox(value: str | None) -> None:
    assert safe_next(value) == "/inbox"


@pytest.mark.parametrize(
    "fields", [{"oidc_issuer": "https://idp.example"}, {"oidc_client_id": "agui-inbox"}]
)
def test_half_an_oidc_client_does_not_start(fields: dict[str, str]) -> None:
    with pytest.raises(AuthConfigError, match="go together"):
        create_app(EXAMPLES, Settings(auth_hs256_secret=TEST_SECRET, **fields))


def test_sign_in_without_a_session_secret_is_warned_about_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    create_app(EXAMPLES, Settings(auth_hs256_secret=TEST_SECRET))
    assert EPHEMERAL_SESSIONS_WARNING not in caplog.messages
    create_app(EXAMPLES, Settings(auth_hs256_secret=TEST_SECRET, inbox_dev_signin=True))
    assert caplog.messages.count(EPHEMERAL_SESSIONS_WARNING) == 1
