"""The ``payments`` example end to end (real gateway, worker and Temporal server): who
approves depends on the amount, an approver may correct the payment, and the
conversation and the state say what was paid, on what arguments, approved by whom.

Who decided (``editedBy``, a permit's approvers) and ``Interrupt.metadata.approvers``
come from the thread's side of approver policies; where a thread without it leaves them
empty, the tests say what each looks like either way. The tests of approvers other than
the owner (finance, n-of-m) need that side, and skip without it.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.helpers import (
    OWNER,
    Stack,
    bearer,
    eventually,
    new_thread,
    post_run,
    run_input,
    types,
)
from workflows.approvers import ApproversView
from workflows.errors import ErrorCode


async def ask(stack: Stack, thread_id: str, text: str) -> dict[str, Any]:
    """Send ``text`` to ``payments``; the one interrupt its run ended on."""
    events = await post_run(stack.http, "payments", run_input(thread_id, "r1", text))
    assert types(events)[-3:] == ["STATE_SNAPSHOT", "MESSAGES_SNAPSHOT", "RUN_FINISHED"]
    outcome = events[-1]["outcome"]
    assert outcome["type"] == "interrupt", events
    [interrupt] = outcome["interrupts"]
    assert interrupt["reason"] == "tool_call"
    return dict(interrupt)


async def resume(
    stack: Stack, thread_id: str, interrupt: dict[str, Any], status: str, payload: Any = None
) -> list[dict[str, Any]]:
    entry = {"interruptId": interrupt["id"], "status": status, "payload": payload}
    body = {"threadId": thread_id, "runId": "r2", "messages": [], "resume": [entry]}
    return await post_run(stack.http, "payments", body)


def result_of(events: list[dict[str, Any]]) -> Any:
    [content] = [e["content"] for e in events if e["type"] == "TOOL_CALL_RESULT"]
    return json.loads(content)


def reply_text(events: list[dict[str, Any]]) -> str:
    return "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")


async def thread_of(http: httpx.AsyncClient, thread_id: str) -> dict[str, Any]:
    response = await http.get(f"/threads/{thread_id}")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def deciders(interrupt: dict[str, Any], *who: str) -> list[str]:
    """Who the thread records as having decided: ``who`` once it records deciders
    (it shows the interrupt's approvers then), nobody before."""
    return list(who) if ApproversView.of(interrupt.get("metadata")) is not None else []


async def test_the_owner_approves_a_small_payment_and_it_is_paid_once(stack: Stack) -> None:
    thread_id = new_thread()
    interrupt = await ask(stack, thread_id, "pay 50 to ACME")
    assert interrupt["message"] == "Pay 50 to ACME?"
    assert "editedArgs" in interrupt["responseSchema"]["properties"]
    shown = ApproversView.of(interrupt.get("metadata"))
    if shown is not None:  # the thread's side of approver policies
        assert (shown.users, shown.groups, shown.needed) == ([OWNER], [], 1)

    done = await resume(stack, thread_id, interrupt, "resolved", {"approved": True})

    result = result_of(done)
    assert "editedArgs" not in result
    assert (result["status"], result["payee"], result["amount"]) == ("paid", "ACME", 50.0)
    assert result["approvers"] == deciders(interrupt, OWNER)
    paid = f"Paid 50 to ACME (payment {result['paymentId']})"
    assert reply_text(done) in (f"{paid}.", f"{paid}, approved by {OWNER}.")
    assert done[-1]["outcome"] == {"type": "success"}
    thread = await thread_of(stack.http, thread_id)
    assert thread["state"]["payments"] == [
        {
            "toolCallId": interrupt["toolCallId"],
            "payee": "ACME",
            "amount": 50.0,
            "paymentId": result["paymentId"],
            "approvers": result["approvers"],
        }
    ]


async def test_an_approval_with_edits_pays_the_edited_amount_and_says_so(stack: Stack) -> None:
    thread_id = new_thread()
    interrupt = await ask(stack, thread_id, "pay 50 to ACME")
    edited = {"payee": "ACME", "amount": 80}

    done = await resume(
        stack, thread_id, interrupt, "resolved", {"approved": True, "editedArgs": edited}
    )

    # The client and the model both see that a person changed the call, and to what.
    result = result_of(done)
    assert result["editedArgs"] == edited
    assert result["editedBy"] == deciders(interrupt, OWNER)
    assert (result["result"]["status"], result["result"]["amount"]) == ("paid", 80.0)
    [*_, snapshot] = [e for e in done if e["type"] == "MESSAGES_SNAPSHOT"]
    [tool_message] = [m for m in snapshot["messages"] if m["role"] == "tool"]
    assert json.loads(tool_message["content"]) == result
    who = OWNER if result["editedBy"] else "The approver"
    assert reply_text(done).endswith(f" {who} changed the amount from 50 to 80 before approving.")
    thread = await thread_of(stack.http, thread_id)
    assert [(p["payee"], p["amount"]) for p in thread["state"]["payments"]] == [("ACME", 80.0)]


@pytest.mark.parametrize("answer", ["denied", "cancelled"])
async def test_a_payment_not_approved_pays_nothing(stack: Stack, answer: str) -> None:
    thread_id = new_thread()
    interrupt = await ask(stack, thread_id, "pay 50 to ACME")

    if answer == "denied":
        done = await resume(stack, thread_id, interrupt, "resolved", {"approved": False})
    else:
        done = await resume(stack, thread_id, interrupt, "cancelled")

    why = "the user denied it." if answer == "denied" else "the question was cancelled."
    assert reply_text(done) == f"Nothing was paid: {why}"
    assert done[-1]["outcome"] == {"type": "success"}
    assert "payments" not in (await thread_of(stack.http, thread_id))["state"]


async def test_larger_payments_say_whose_approval_they_need(stack: Stack) -> None:
    one = await ask(stack, new_thread(), "pay 250 to ACME")
    two = await ask(stack, new_thread(), "pay 20000 to ACME")

    assert one["message"] == (
        "Pay 250 to ACME? Needs one approval from finance (not the requester)."
    )
    assert two["message"] == (
        "Pay 20000 to ACME? Needs two approvals from finance (not the requester); "
        "after 1 day, cfo too."
    )
    for interrupt, needed in ((one, 1), (two, 2)):
        shown = ApproversView.of(interrupt.get("metadata"))
        if shown is not None:  # the thread's side of approver policies
            assert (shown.users, shown.groups, shown.needed) == ([], ["finance"], needed)
            assert shown.exclude_requester
    shown = ApproversView.of(two.get("metadata"))
    if shown is not None:
        assert shown.escalation is not None and shown.escalation.groups == ["cfo"]


# --- approvers other than the owner: the thread's side of approver policies ------------


@pytest.fixture
async def finance(stack: Stack) -> AsyncIterator[dict[str, httpx.AsyncClient]]:
    """Clients of bob and carol (finance) and dave (cfo)."""
    people = {"bob": ["finance"], "carol": ["finance"], "dave": ["cfo"]}
    clients = {
        name: httpx.AsyncClient(base_url=stack.url, headers=bearer(name, groups), timeout=30)
        for name, groups in people.items()
    }
    yield clients
    for client in clients.values():
        await client.aclose()


async def asked_of_finance(stack: Stack, thread_id: str, text: str) -> dict[str, Any]:
    interrupt = await ask(stack, thread_id, text)
    if ApproversView.of(interrupt.get("metadata")) is None:
        pytest.skip("needs the thread's side of approver policies (metadata.approvers)")
    return interrupt


async def decide(
    http: httpx.AsyncClient, thread_id: str, interrupt: dict[str, Any], payload: Any
) -> httpx.Response:
    return await http.post(
        f"/threads/{thread_id}/interrupts/{interrupt['id']}/decisions",
        json={"status": "resolved", "payload": payload},
    )


async def paid(stack: Stack, thread_id: str) -> dict[str, Any]:
    """The thread once its turn went on after the deciding decision."""
    thread: dict[str, Any] = {}

    async def settled() -> bool:
        nonlocal thread
        thread = await thread_of(stack.http, thread_id)
        return thread["status"] == "idle" and bool(thread["state"].get("payments"))

    await eventually(settled, what="the payment")
    return thread


async def test_finance_approves_from_outside_the_chat_and_the_requester_may_not(
    stack: Stack, finance: dict[str, httpx.AsyncClient]
) -> None:
    thread_id = new_thread()
    interrupt = await asked_of_finance(stack, thread_id, "pay 250 to ACME")

    refused = await resume(stack, thread_id, interrupt, "resolved", {"approved": True})
    assert (refused[-1]["type"], refused[-1]["code"]) == ("RUN_ERROR", ErrorCode.NOT_AN_APPROVER)
    response = await decide(finance["dave"], thread_id, interrupt, {"approved": True})
    assert response.status_code == 403
    assert response.json()["error"]["code"] == ErrorCode.NOT_AN_APPROVER

    response = await decide(finance["bob"], thread_id, interrupt, {"approved": True})
    assert response.status_code == 200, response.text
    assert response.json()["outcome"] == "settled"

    thread = await paid(stack, thread_id)
    [payment] = thread["state"]["payments"]
    assert (payment["amount"], payment["approvers"]) == (250.0, ["bob"])
    assert thread["messages"][-1]["content"].endswith(", approved by bob.")


async def test_two_of_finance_must_approve_a_large_payment(
    stack: Stack, finance: dict[str, httpx.AsyncClient]
) -> None:
    thread_id = new_thread()
    interrupt = await asked_of_finance(stack, thread_id, "pay 20000 to ACME")

    first = await decide(finance["bob"], thread_id, interrupt, {"approved": True})
    assert first.status_code == 200 and first.json()["outcome"] == "pending", first.text
    [waiting] = (await thread_of(stack.http, thread_id))["interrupts"]
    shown = ApproversView.of(waiting.get("metadata"))
    assert shown is not None and (shown.received, shown.approved_by) == (1, ["bob"])
    second = await decide(finance["carol"], thread_id, interrupt, {"approved": True})
    assert second.status_code == 200 and second.json()["outcome"] == "settled", second.text

    thread = await paid(stack, thread_id)
    [payment] = thread["state"]["payments"]
    assert (payment["amount"], sorted(payment["approvers"])) == (20000.0, ["bob", "carol"])
