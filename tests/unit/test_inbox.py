"""Guards the inbox's pure parts (``gateway/inbox.py``): the visibility query and its
filters, the inbox order, and page tokens and cursors that round-trip and refuse
anything this gateway did not hand out.

The helpers are private; they are tested directly because the public listings need a
visibility store, and the gateway tests cover how their errors reach HTTP.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from ag_ui.core import Interrupt

from gateway.auth import Principal
from gateway.inbox import (
    InboxItem,
    InvalidCursor,
    _cursor,
    _cursor_key,
    _in_role,
    _is_owner,
    _sort_key,
    _token,
    _token_bytes,
    approver_entries,
    may_decide,
    thread_query,
)
from workflows import budgets, search_attributes, visibility
from workflows.approvers import ApproversView, EscalationView

BASE = 'WorkflowType = "ThreadWorkflow" AND ExecutionStatus = "Running" AND TaskQueue = "q"'


def item(thread_id: str, interrupt_id: str, expires_at: str | None = None) -> InboxItem:
    return InboxItem(
        thread_id=thread_id,
        agent="demo",
        interrupt=Interrupt(id=interrupt_id, reason="tool_call", expires_at=expires_at),
    )


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode()


# --- thread_query ----------------------------------------------------------------------------


def test_the_query_names_live_thread_workflows_of_the_task_queue() -> None:
    assert thread_query("q", None) == BASE


def test_each_filter_adds_its_search_attribute() -> None:
    query = thread_query("q", None, agent="demo", status="waiting", reason="demo:policy_hold")

    assert query == (
        f'{BASE} AND {search_attributes.AGENT.name} = "demo"'
        f' AND {search_attributes.THREAD_STATUS.name} = "waiting"'
        f' AND {search_attributes.INTERRUPT_REASONS.name} = "demo:policy_hold"'
    )


@pytest.mark.parametrize("reason", ["tool_call", "demo:policy_hold", "a.b-c_d", "x1"])
def test_plain_names_are_valid_filters(reason: str) -> None:
    assert thread_query("q", None, reason=reason).endswith(f'AguiInterruptReasons = "{reason}"')


@pytest.mark.parametrize(
    "reason",
    [
        'x" OR WorkflowType = "Other',
        "x' OR 1=1",
        "tool_call OR true",
        "a\\b",
        "",
        "a\tb",
    ],
    ids=["double-quote", "single-quote", "spaces", "backslash", "empty", "tab"],
)
def test_a_filter_that_is_not_a_plain_name_is_refused(reason: str) -> None:
    with pytest.raises(ValueError, match="AguiInterruptReasons"):
        thread_query("q", None, reason=reason)


def test_an_agent_filter_is_checked_like_the_others() -> None:
    with pytest.raises(ValueError, match="AguiAgent"):
        thread_query("q", None, agent='demo" OR AguiAgent = "files')


def test_a_filter_with_a_trailing_newline_is_refused() -> None:
    with pytest.raises(ValueError):
        thread_query("q", None, reason="tool_call\n")


# --- the inbox order ----------------------------------------------------------------------------


def test_the_inbox_is_soonest_deadline_first_and_undated_last() -> None:
    later = item("t1", "i1", "2026-05-02T00:00:00Z")
    undated_b = item("t2", "i1")
    soonest = item("t3", "i9", "2026-05-01T00:00:00Z")
    undated_a = item("t1", "i2")
    # 10:00 at +02:00 is 08:00 UTC, before 09:00 UTC on the same day.
    offset = item("t4", "i1", "2026-05-01T10:00:00+02:00")
    utc = item("t4", "i2", "2026-05-01T09:00:00Z")

    ordered = sorted([later, undated_b, soonest, undated_a, utc, offset], key=_sort_key)

    assert ordered == [soonest, offset, utc, later, undated_a, undated_b]


def test_equal_deadlines_are_ordered_by_thread_then_interrupt() -> None:
    deadline = "2026-05-01T00:00:00Z"
    items = [item("t2", "a", deadline), item("t1", "b", deadline), item("t1", "a", deadline)]

    ordered = sorted(items, key=_sort_key)

    assert [(i.thread_id, i.interrupt.id) for i in ordered] == [
        ("t1", "a"),
        ("t1", "b"),
        ("t2", "a"),
    ]


# --- cursors ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "inbox_item",
    [item("t1", "i1", "2026-05-01T12:30:00.5Z"), item("t/ü", "i 2")],
    ids=["dated", "undated"],
)
def test_a_cursor_reads_back_as_its_items_place(inbox_item: InboxItem) -> None:
    cursor = _cursor(inbox_item)

    assert _cursor_key(cursor) == _sort_key(inbox_item)
    assert set(cursor) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_=")


def test_items_after_a_cursor_are_exactly_those_sorted_after_its_item() -> None:
    items = sorted(
        [item("t1", "i1", "2026-05-01T00:00:00Z"), item("t2", "i1"), item("t3", "i1")],
        key=_sort_key,
    )

    after = [[i for i in items if _sort_key(i) > _cursor_key(_cursor(x))] for x in items]

    assert after == [items[1:], items[2:], []]


@pytest.mark.parametrize(
    "cursor",
    [
        "not base64!",
        "é",
        b64(b"not json"),
        b64(b"\xff\xfe"),
        b64(b"null"),
        b64(json.dumps([False, "2026-05-01T00:00:00+00:00", "t1"]).encode()),
        b64(json.dumps([False, "yesterday", "t1", "i1"]).encode()),
        b64(json.dumps([False, 12, "t1", "i1"]).encode()),
    ],
    ids=[
        "not-base64",
        "not-ascii",
        "not-json",
        "not-utf8",
        "not-a-list",
        "three-parts",
        "not-a-date",
        "date-not-a-string",
    ],
)
def test_a_mangled_cursor_is_invalid(cursor: str) -> None:
    with pytest.raises(InvalidCursor, match="is not a cursor of this gateway"):
        _cursor_key(cursor)


def test_a_made_up_cursor_is_refused_or_compares_with_every_item() -> None:
    made_up = b64(json.dumps([False, "2026-05-01T00:00:00", "t1", "i1"]).encode())
    try:
        after = _cursor_key(made_up)
    except InvalidCursor:
        return
    assert _sort_key(item("t2", "i1", "2026-05-02T00:00:00Z")) > after


# --- page tokens ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [b"\x00", b"page-2", bytes(range(256)), b"\xfb\xff" * 7],
    ids=["one-byte", "ascii", "every-byte", "url-unsafe-in-std-base64"],
)
def test_a_page_token_is_url_safe_and_reads_back_as_its_bytes(raw: bytes) -> None:
    token = _token(raw)

    assert "+" not in token and "/" not in token
    assert _token_bytes(token) == raw


def test_no_page_token_is_the_first_page() -> None:
    assert _token_bytes(None) is None


def _flip(token: str, index: int) -> str:
    char = "A" if token[index] != "A" else "B"
    return token[:index] + char + token[index + 1 :]


@pytest.mark.parametrize(
    "mangle",
    [
        lambda token: _flip(token, 0),
        lambda token: _flip(token, len(token) // 2),
        lambda token: token[:-4],
        lambda token: token + "AAAA",
        lambda token: token.replace("=", ""),
        lambda token: "!" + token,
        lambda token: b64(b"page-2"),
        lambda token: b64(b"short"),
        lambda token: "",
        lambda token: _token(b""),
    ],
    ids=[
        "first-char",
        "middle-char",
        "truncated",
        "extended",
        "padding-dropped",
        "not-base64",
        "no-checksum",
        "shorter-than-checksum",
        "empty",
        "checksum-of-nothing",
    ],
)
def test_a_mangled_page_token_is_invalid(mangle: Callable[[str], str]) -> None:
    token = mangle(_token(b"page-2 of the visibility store"))

    with pytest.raises(InvalidCursor, match="is not a page token of this gateway"):
        _token_bytes(token)


# --- who may decide: AguiApprovers and the inbox's checks ---------------------------------------

NOW = datetime(2026, 5, 1, tzinfo=UTC)


def asking(view: ApproversView | dict[str, Any] | None, interrupt_id: str = "i1") -> Interrupt:
    """An interrupt whose ``metadata.approvers`` is ``view``."""
    shown = view.model_dump(mode="json", by_alias=True) if isinstance(view, ApproversView) else view
    return Interrupt(
        id=interrupt_id,
        reason="tool_call",
        metadata=None if view is None else {"approvers": shown, "other": 1},
    )


def test_an_approver_is_listed_by_name_when_plain_and_by_digest_otherwise() -> None:
    assert visibility.approver_key("u", "auth0|5f1c-ab.cd@example.com") == (
        "u:auth0|5f1c-ab.cd@example.com"
    )
    assert visibility.approver_key("g", "finance") == "g:finance"
    for name in ['eve" OR AguiOwner != "x', "x" * 65, "a b", ""]:
        key = visibility.approver_key("g", name)
        assert key.startswith("g:sha256:") and len(key) == len("g:sha256:") + 32
        assert '"' not in key and " " not in key
    assert visibility.approver_key("u", "a b") != visibility.approver_key("g", "a b")


def test_the_approvers_attribute_names_everyone_who_may_decide_once() -> None:
    escalation = EscalationView(at=NOW, users=["boss"], groups=["finance", "audit"])
    waiting = [
        asking(ApproversView(users=["alice"], groups=["finance"])),
        asking(None, "i2"),
        asking(ApproversView(users=["bob", "alice"], escalation=escalation), "i3"),
    ]

    keys = visibility.approver_keys(waiting)

    assert keys == ["u:alice", "g:finance", "u:bob", "u:boss", "g:audit"]
    [pair] = [
        p
        for p in visibility.attributes("demo", "alice", "waiting", NOW, waiting)
        if p.key == search_attributes.APPROVERS
    ]
    assert pair.value == keys


def test_an_approvers_view_that_does_not_parse_adds_nothing() -> None:
    waiting = [asking({"users": "not a list"}), asking({"groups": ["g"]}, "i2")]

    assert visibility.approver_keys(waiting) == []


@pytest.mark.parametrize(
    ("users", "length"),
    [(100, 1), (30, 64), (100, 64)],
    ids=["many-short", "few-long", "many-long"],
)
def test_the_approvers_attribute_stays_bounded_and_says_when_it_is_cut(
    users: int, length: int
) -> None:
    names = [f"{i:0{length}d}" for i in range(users)]
    waiting = [asking(ApproversView(users=names, groups=["finance"]))]

    keys = visibility.approver_keys(waiting)

    assert keys[-1] == visibility.MORE_APPROVERS
    assert keys[:-1] == [f"u:{name}" for name in names][: len(keys) - 1]
    assert len(keys) <= visibility.APPROVER_KEYS_SHOWN
    assert len(json.dumps(keys).encode()) <= visibility.APPROVER_KEYS_BYTES < 2048


def test_an_approver_finds_the_threads_that_list_them_or_that_list_too_many() -> None:
    principal = Principal("alice", frozenset({"finance", "a b"}), admin=False)

    entries = approver_entries(principal)

    assert entries == [
        "u:alice",
        "g:finance",
        visibility.approver_key("g", "a b"),
        visibility.MORE_APPROVERS,
    ]
    assert thread_query("q", "alice", approvers=entries) == (
        f'{BASE} AND (AguiOwner = "alice" OR AguiApprovers IN ("u:alice", '
        f'"g:finance", "{entries[2]}", "*"))'
    )
    assert thread_query("q", "alice") == f'{BASE} AND AguiOwner = "alice"'
    assert thread_query("q", None, approvers=entries) == BASE


def test_an_interrupt_naming_no_approvers_is_its_owners_to_decide() -> None:
    alice = Principal("alice", frozenset({"finance"}), admin=False)
    admin = Principal("root", frozenset({"agui-admins"}), admin=True)

    assert may_decide(asking(None), alice, mine=True, now=NOW)
    assert not may_decide(asking(None), alice, mine=False, now=NOW)
    assert not may_decide(asking(None), admin, mine=False, now=NOW)
    # A view that does not parse names nobody: the owner decides.
    assert may_decide(asking({"users": 3}), alice, mine=True, now=NOW)


def test_an_interrupt_naming_approvers_is_theirs_to_decide_as_its_view_says() -> None:
    bob = Principal("bob", frozenset({"finance"}), admin=False)
    carol = Principal("carol", frozenset({"sales"}), admin=False)
    boss = Principal("boss", frozenset(), admin=False)
    escalation = EscalationView(at=NOW + timedelta(hours=1), users=["boss"])
    finance = asking(ApproversView(users=[], groups=["finance"], escalation=escalation))
    separated = asking(ApproversView(users=["bob"], exclude_requester=True))

    assert may_decide(finance, bob, mine=False, now=NOW)
    assert not may_decide(finance, carol, mine=False, now=NOW)
    assert not may_decide(finance, boss, mine=False, now=NOW)
    assert may_decide(finance, boss, mine=False, now=NOW + timedelta(hours=1))
    assert not may_decide(separated, bob, mine=True, now=NOW)


@pytest.mark.parametrize(
    ("role", "may_decide", "mine", "admin", "listed"),
    [
        (None, False, False, False, False),
        (None, True, False, False, True),
        (None, False, True, False, True),
        (None, False, False, True, True),
        ("decide", False, True, True, False),
        ("decide", True, False, False, True),
        ("mine", True, False, True, False),
        ("mine", False, True, False, True),
    ],
)
def test_the_role_filter_keeps_what_it_names(
    role: Any, may_decide: bool, mine: bool, admin: bool, listed: bool
) -> None:
    assert _in_role(role, may_decide, mine, admin) == listed


def test_a_thread_is_the_callers_by_its_memo_or_else_its_owner_attribute() -> None:
    alice = Principal('al"ice', frozenset(), admin=False)

    assert _is_owner(alice, 'al"ice', None)
    assert not _is_owner(alice, "bob", visibility.owner_key('al"ice'))
    assert _is_owner(alice, None, visibility.owner_key('al"ice'))
    assert not _is_owner(alice, None, "bob")


def test_a_cut_interrupt_in_the_memo_keeps_who_may_decide_it() -> None:
    view = ApproversView(users=["bob"], groups=["finance"], needed=2)
    big = Interrupt(
        id="i1",
        reason="tool_call",
        message="x" * 10_000,
        response_schema={"enum": ["y" * 5_000]},
        metadata={"approvers": view.model_dump(mode="json", by_alias=True), "note": "z" * 3_000},
    )

    [shown] = visibility.memo([big], "alice")[visibility.INTERRUPTS_MEMO]

    assert shown["metadata"]["truncated"] is True
    assert "note" not in shown["metadata"] and "responseSchema" not in shown
    assert ApproversView.of(shown["metadata"]) == view
    assert budgets.json_size(shown) < budgets.MEMO_INTERRUPT_BYTES
