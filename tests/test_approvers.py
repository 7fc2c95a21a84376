"""Approver policies end to end: who may decide an interrupt, decisions from anywhere
(``POST /threads/{threadId}/interrupts/{interruptId}/decisions``), n-of-m, vetoes,
edits held to the policy, permits, the audit trail, restarts, continue-as-new and
escalation (days, on the time-skipping server).

The agent below pays by amount: up to 100 its owner approves; above, one member of
``finance`` other than the requester; above 10,000, two of them, and after a day the
``cfo`` group may decide too.
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from collections.abc import AsyncIterator, Sequence
from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest
from ag_ui.core import RunFinishedEvent, RunFinishedInterruptOutcome
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.workflowservice.v1 import DescribeWorkflowExecutionRequest
from temporalio.client import Client
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment

from gateway.streaming import thread_handle
from settings import Settings
from tests.helpers import (
    OWNER,
    TEST_SECRET,
    Stack,
    assert_valid_stream,
    bearer,
    eventually,
    gateway_client,
    new_thread,
    post_run,
    read_sse,
    run_input,
    serve_gateway,
    serve_stack,
    sse_messages,
    start_thread,
    types,
)
from tests.receiver import Receiver
from worker import build_worker
from workflows.approvers import Approvers, Escalation, arguments_digest
from workflows.models import RunRequest
from workflows.sdk import (
    AgentDefinition,
    Approval,
    ChatReply,
    ChatRequest,
    ProposedCall,
    ScriptedModel,
    last_user_text,
    tool,
    tool_results,
)
from workflows.thread import ThreadWorkflow

AGENT = "approvals"
APPROVE = {"approved": True}
DENY = {"approved": False}
FINANCE = ["finance"]


def policy_by_amount(arguments: dict[str, Any]) -> Approvers | None:
    """Who approves a payment: by its amount."""
    amount = arguments["amount"]
    if amount <= 100:
        return None
    if amount <= 10_000:
        return Approvers(groups=FINANCE, exclude_requester=True)
    return Approvers(
        groups=FINANCE,
        needed=2,
        exclude_requester=True,
        escalation=Escalation(after=timedelta(days=1), groups=["cfo"]),
    )


@tool(approval=Approval(edits=True, approvers=policy_by_amount))
async def pay(payee: str, amount: int) -> dict[str, Any]:
    """Pay ``amount`` to ``payee``."""
    return {"paid": amount, "to": payee}


@tool(approval=Approval(expires=timedelta(hours=1)))
async def hold(reason: str) -> str:
    """Put a hold on the account."""
    return f"held: {reason}"


@tool(approval=Approval())
async def refund(payee: str, amount: int) -> str:
    """Refund ``amount`` to ``payee``: a tool that refuses the permit it is run under,
    as the SDK's check of a permit's digest does."""
    raise ApplicationError(
        "The arguments are not those approved.", type="PERMIT_MISMATCH", non_retryable=True
    )


CALL = re.compile(r"(pay|refund) (\w+) (\d+)")


def script(request: ChatRequest) -> ChatReply:
    """``pay <payee> <amount>`` (or ``refund``), ``hold``; then report the results."""
    results = tool_results(request.messages)
    if results:
        return ChatReply(text="; ".join(content for _, content in results))
    text = last_user_text(request.messages)
    calls = [
        ProposedCall(name=name, arguments={"payee": payee, "amount": int(amount)})
        for name, payee, amount in CALL.findall(text)
    ]
    if "hold" in text:
        calls.append(ProposedCall(name="hold", arguments={"reason": "review"}))
    return ChatReply(tool_calls=calls) if calls else ChatReply(text="Nothing to pay.")


APPROVALS = AgentDefinition(
    name=AGENT,
    description="Pays, with approvers by amount.",
    model=ScriptedModel(AGENT, script),
    tools=[pay, hold, refund],
)


@pytest.fixture(scope="module")
async def payments(client: Client) -> AsyncIterator[Stack]:
    """A stack serving the agent above."""
    async with serve_stack(client, agents=[APPROVALS]) as running:
        yield running


async def ask(stack: Stack, text: str) -> tuple[str, list[dict[str, Any]]]:
    """A new thread of the owner's whose first run asks what ``text`` calls for."""
    thread_id = new_thread()
    events = await post_run(stack.http, AGENT, run_input(thread_id, "r1", text))
    assert events[-1]["outcome"]["type"] == "interrupt", types(events)
    interrupts: list[dict[str, Any]] = events[-1]["outcome"]["interrupts"]
    return thread_id, interrupts


async def decide(
    url: str,
    thread_id: str,
    interrupt: dict[str, Any],
    subject: str,
    groups: Sequence[str] = (),
    status: str = "resolved",
    payload: Any = APPROVE,
) -> httpx.Response:
    """``subject`` (in ``groups``) decides ``interrupt`` through the gateway."""
    body: dict[str, Any] = {"status": status}
    if payload is not None:
        body["payload"] = payload
    async with httpx.AsyncClient(base_url=url, headers=bearer(subject, groups), timeout=30) as http:
        return await http.post(
            f"/threads/{thread_id}/interrupts/{interrupt['id']}/decisions", json=body
        )


async def view(stack: Stack, thread_id: str) -> dict[str, Any]:
    response = await stack.http.get(f"/threads/{thread_id}")
    assert response.status_code == 200, response.text
    thread: dict[str, Any] = response.json()
    return thread


async def settled_run(stack: Stack, thread_id: str, run_id: str) -> list[dict[str, Any]]:
    """The events of the run a decision continued the thread in, once it ended; checked
    like every stream."""

    async def ended() -> bool:
        runs = (await view(stack, thread_id))["runs"]
        return any(r["runId"] == run_id and r["status"] != "running" for r in runs)

    await eventually(ended, what=f"run {run_id} to end")
    async with stack.http.stream("GET", f"/threads/{thread_id}/runs/{run_id}/events") as r:
        events = [event for _, event in await read_sse(r)]
    assert_valid_stream(events, thread_id)
    return events


def tool_result(events: list[dict[str, Any]]) -> str:
    (result,) = [e["content"] for e in events if e["type"] == "TOOL_CALL_RESULT"]
    content: str = result
    return content


def resume(thread_id: str, run_id: str, *entries: dict[str, Any]) -> dict[str, Any]:
    return {"threadId": thread_id, "runId": run_id, "messages": [], "resume": list(entries)}


def entry(interrupt: dict[str, Any], payload: Any = APPROVE) -> dict[str, Any]:
    return {"interruptId": interrupt["id"], "status": "resolved", "payload": payload}


def approvers(interrupt: dict[str, Any]) -> dict[str, Any]:
    shown: dict[str, Any] = interrupt["metadata"]["approvers"]
    return shown


def digest(amount: int, payee: str = "bob") -> str:
    return arguments_digest({"payee": payee, "amount": amount})


async def test_every_interrupt_says_who_may_decide_it(payments: Stack) -> None:
    thread_id, (small,) = await ask(payments, "pay bob 50")
    # No policy: the owner decides, as a chat always has.
    assert approvers(small) == {
        "users": [OWNER],
        "groups": [],
        "needed": 1,
        "received": 0,
        "approvedBy": [],
        "excludeRequester": False,
    }
    _, (large,) = await ask(payments, "pay bob 20000")
    shown = approvers(large)
    assert (shown["users"], shown["groups"], shown["needed"]) == ([], FINANCE, 2)
    assert shown["excludeRequester"] is True
    assert (shown["escalation"]["groups"], shown["escalation"]["escalated"]) == (["cfo"], False)

    # The owner answers their own as before, and the approved call gets its permit.
    events = await post_run(payments.http, AGENT, resume(thread_id, "r2", entry(small)))
    assert events[-1]["outcome"] == {"type": "success"}
    assert tool_result(events) == '{"paid": 50, "to": "bob"}'
    audit = (await view(payments, thread_id))["audit"]
    assert [(a["kind"], a["principal"], a["digest"]) for a in audit] == [
        ("decision", OWNER, digest(50)),
        ("permit", None, digest(50)),
    ]
    assert audit[1]["approvers"] == [OWNER]


async def test_the_requester_may_not_approve_and_a_finance_member_decides(
    payments: Stack,
) -> None:
    thread_id, (payment,) = await ask(payments, "pay bob 500")
    before = await view(payments, thread_id)

    # Not the owner's resume: one approval of finance, the requester excluded.
    events = await post_run(payments.http, AGENT, resume(thread_id, "r2", entry(payment)))
    assert events[-1]["code"] == "NOT_AN_APPROVER"
    assert f"/threads/{thread_id}/interrupts/{payment['id']}/decisions" in events[-1]["message"]
    # Nor the owner's decision, even as a member of finance; nor anyone outside it.
    for subject, groups in [(OWNER, FINANCE), ("bob", [])]:
        response = await decide(payments.url, thread_id, payment, subject, groups)
        assert response.status_code == 403, response.text
        assert response.json()["error"]["code"] == "NOT_AN_APPROVER"
    assert await view(payments, thread_id) == before

    response = await decide(payments.url, thread_id, payment, "carol", FINANCE)
    assert response.status_code == 200, response.text
    result = response.json()
    run_id = result.pop("runId")
    assert result == {
        "outcome": "settled",
        "interruptId": payment["id"],
        "status": "resolved",
        "approved": True,
        "received": 1,
        "needed": 1,
        "decidedBy": ["carol"],
    }

    # The agent went on in a run of its own, sent by the approver.
    events = await settled_run(payments, thread_id, run_id)
    assert tool_result(events) == '{"paid": 500, "to": "bob"}'
    assert events[-1]["outcome"] == {"type": "success"}
    thread = await view(payments, thread_id)
    assert [(r["runId"], r["status"], r["sentBy"]) for r in thread["runs"]] == [
        ("r1", "interrupted", OWNER),
        (run_id, "succeeded", "carol"),
    ]
    assert [m["role"] for m in thread["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert thread["messages"][-1]["content"] == '{"paid": 500, "to": "bob"}'
    assert [
        (a["kind"], a["principal"], a["interruptId"], a["digest"], a["runId"])
        for a in thread["audit"]
    ] == [
        ("decision", "carol", payment["id"], digest(500), run_id),
        ("permit", None, payment["id"], digest(500), run_id),
    ]
    assert thread["audit"][1]["approvers"] == ["carol"]

    # The same decision again is a repeat; another one comes too late.
    again = await decide(payments.url, thread_id, payment, "carol", FINANCE)
    assert again.json()["outcome"] == "repeated" and again.json()["runId"] == run_id
    late = await decide(payments.url, thread_id, payment, "dave", FINANCE)
    assert late.status_code == 409
    assert late.json()["error"]["code"] == "INTERRUPT_ALREADY_ANSWERED"

    # The owner's next run goes on from there.
    events = await post_run(payments.http, AGENT, run_input(thread_id, "r3", "pay bob 500", "ok"))
    assert events[-1]["outcome"] == {"type": "success"}


async def interrupt_view(
    url: str, thread_id: str, interrupt: dict[str, Any], subject: str, groups: Sequence[str] = ()
) -> httpx.Response:
    """``GET /threads/{thread_id}/interrupts/{interrupt_id}`` as ``subject``."""
    async with httpx.AsyncClient(base_url=url, headers=bearer(subject, groups), timeout=30) as http:
        return await http.get(f"/threads/{thread_id}/interrupts/{interrupt['id']}")


async def test_an_interrupt_shows_its_approvers_the_question_and_then_its_outcome(
    payments: Stack,
) -> None:
    thread_id, (payment,) = await ask(payments, "pay bob 500")

    # Whoever may decide it sees the conversation up to the question; the owner sees
    # it too, though the policy excludes them from deciding.
    carol = await interrupt_view(payments.url, thread_id, payment, "carol", FINANCE)
    assert carol.status_code == 200, carol.text
    shown = carol.json()
    assert (shown["threadId"], shown["agent"], shown["owner"]) == (thread_id, AGENT, OWNER)
    assert (shown["open"], shown["mayDecide"], shown["audit"]) == (True, True, [])
    assert shown["interrupt"]["id"] == payment["id"]
    assert approvers(shown["interrupt"])["groups"] == FINANCE
    assert [m["role"] for m in shown["messages"]] == ["user", "assistant"]
    assert shown["messages"][0]["content"] == "pay bob 500"
    # Asked when the run that asked it ended; the inbox lists it so too.
    [run] = (await view(payments, thread_id))["runs"]
    assert datetime.fromisoformat(shown["askedAt"]) == datetime.fromisoformat(run["finishedAt"])
    async with httpx.AsyncClient(
        base_url=payments.url, headers=bearer("carol", FINANCE), timeout=30
    ) as http:

        async def listed_when_asked() -> bool:
            page = (await http.get("/interrupts", params={"role": "decide"})).json()
            items = [i for i in page["interrupts"] if i["threadId"] == thread_id]
            return [datetime.fromisoformat(i["askedAt"]) for i in items] == [
                datetime.fromisoformat(run["finishedAt"])
            ]

        await eventually(listed_when_asked, what="the inbox to say when it was asked")
    owners = (await interrupt_view(payments.url, thread_id, payment, OWNER)).json()
    assert (owners["open"], owners["mayDecide"]) == (True, False)
    # Anyone else: no such thread, as for a thread that does not exist.
    erin = await interrupt_view(payments.url, thread_id, payment, "erin", ["ops"])
    assert erin.status_code == 404
    assert erin.json()["error"]["code"] == "UNKNOWN_THREAD"

    decided = await decide(payments.url, thread_id, payment, "carol", FINANCE)
    assert decided.status_code == 200, decided.text
    await settled_run(payments, thread_id, decided.json()["runId"])

    # Settled: who decided sees the outcome, no longer the conversation.
    after = (await interrupt_view(payments.url, thread_id, payment, "carol", FINANCE)).json()
    assert (after["open"], after["mayDecide"], after["messages"]) == (False, False, [])
    assert after["interrupt"] is None
    assert [(a["kind"], a["principal"], a["status"], a["approved"]) for a in after["audit"]] == [
        ("decision", "carol", "resolved", True),
        ("permit", None, None, None),
    ]
    # Another finance member who did not decide it may no longer see it.
    dave = await interrupt_view(payments.url, thread_id, payment, "dave", FINANCE)
    assert dave.status_code == 404


async def test_the_owners_chat_sees_a_decision_land_as_it_happens(payments: Stack) -> None:
    thread_id, (payment,) = await ask(payments, "pay bob 500")
    (asked,) = (await view(payments, thread_id))["runs"]
    follow = payments.http.stream(
        "GET",
        f"/threads/{thread_id}/events",
        headers={"Last-Event-ID": str(asked["lastSeq"])},
        timeout=httpx.Timeout(30, read=None),
    )
    async with follow as response:
        assert response.status_code == 200, response.text
        messages = sse_messages(response)
        decided = await decide(payments.url, thread_id, payment, "carol", FINANCE)
        run_id = decided.json()["runId"]
        run = [await asyncio.wait_for(anext(messages), 30)]
        while run[-1][1]["type"] not in ("RUN_FINISHED", "RUN_ERROR"):
            run.append(await asyncio.wait_for(anext(messages), 30))
    events = [event for _, event in run]
    assert_valid_stream(events, thread_id)
    assert events[0]["runId"] == run_id and int(run[0][0] or 0) == asked["lastSeq"] + 1
    assert tool_result(events) == '{"paid": 500, "to": "bob"}'
    assert events[-1]["outcome"] == {"type": "success"}


async def test_the_owner_may_always_withdraw_their_request(payments: Stack) -> None:
    thread_id, (payment,) = await ask(payments, "pay bob 500")
    response = await decide(payments.url, thread_id, payment, OWNER, status="cancelled")
    assert response.status_code == 200, response.text
    assert (response.json()["outcome"], response.json()["status"]) == ("settled", "cancelled")
    events = await settled_run(payments, thread_id, response.json()["runId"])
    assert tool_result(events) == "Not run: the question was cancelled."

    # In a resume too.
    thread_id, (payment,) = await ask(payments, "pay bob 500")
    cancel = {"interruptId": payment["id"], "status": "cancelled"}
    events = await post_run(payments.http, AGENT, resume(thread_id, "r2", cancel))
    assert tool_result(events) == "Not run: the question was cancelled."


async def test_two_of_finance_approve_the_same_arguments(payments: Stack) -> None:
    thread_id, (payment,) = await ask(payments, "pay bob 20000")

    first = await decide(payments.url, thread_id, payment, "carol", FINANCE)
    assert first.status_code == 200, first.text
    assert first.json() == {
        "outcome": "pending",
        "interruptId": payment["id"],
        "received": 1,
        "needed": 2,
        "decidedBy": [],
    }
    (shown,) = (await view(payments, thread_id))["interrupts"]
    assert (approvers(shown)["received"], approvers(shown)["approvedBy"]) == (1, ["carol"])
    # The same approver again counts once.
    again = await decide(payments.url, thread_id, payment, "carol", FINANCE)
    assert (again.json()["outcome"], again.json()["received"]) == ("repeated", 1)

    second = await decide(payments.url, thread_id, payment, "dave", FINANCE)
    assert second.status_code == 200, second.text
    result = second.json()
    assert (result["outcome"], result["received"], result["decidedBy"]) == (
        "settled",
        2,
        ["carol", "dave"],
    )
    events = await settled_run(payments, thread_id, result["runId"])
    assert tool_result(events) == '{"paid": 20000, "to": "bob"}'
    audit = (await view(payments, thread_id))["audit"]
    assert [(a["kind"], a["principal"], a["outcome"]) for a in audit] == [
        ("decision", "carol", "applied"),
        ("decision", "dave", "applied"),
        ("permit", None, "applied"),
    ]
    assert audit[2]["approvers"] == ["carol", "dave"]
    assert audit[2]["digest"] == digest(20000)


async def test_a_denial_vetoes_whatever_was_approved(payments: Stack) -> None:
    thread_id, (payment,) = await ask(payments, "pay bob 20000")
    assert (await decide(payments.url, thread_id, payment, "carol", FINANCE)).status_code == 200
    denied = await decide(payments.url, thread_id, payment, "dave", FINANCE, payload=DENY)
    assert denied.status_code == 200, denied.text
    result = denied.json()
    assert (result["outcome"], result["approved"], result["decidedBy"]) == (
        "settled",
        False,
        ["dave"],
    )
    events = await settled_run(payments, thread_id, result["runId"])
    assert tool_result(events) == "Not run: the user denied it."
    audit = (await view(payments, thread_id))["audit"]
    assert [(a["kind"], a["principal"], a["approved"]) for a in audit] == [
        ("decision", "carol", True),
        ("decision", "dave", False),
    ]


async def test_an_edit_is_held_to_the_interrupts_policy(payments: Stack) -> None:
    thread_id, (payment,) = await ask(payments, "pay bob 500")
    before = await view(payments, thread_id)
    raised = {"approved": True, "editedArgs": {"payee": "bob", "amount": 20000}}
    response = await decide(payments.url, thread_id, payment, "carol", FINANCE, payload=raised)
    assert response.status_code == 422, response.text
    assert response.json()["error"]["code"] == "POLICY_EXCEEDED"
    assert await view(payments, thread_id) == before

    lowered = {"approved": True, "editedArgs": {"payee": "bob", "amount": 300}}
    response = await decide(payments.url, thread_id, payment, "carol", FINANCE, payload=lowered)
    assert response.json()["outcome"] == "settled", response.text
    events = await settled_run(payments, thread_id, response.json()["runId"])
    # The conversation says what ran: the edit, who made it, and the result.
    assert json.loads(tool_result(events)) == {
        "editedArgs": {"payee": "bob", "amount": 300},
        "editedBy": ["carol"],
        "result": {"paid": 300, "to": "bob"},
    }
    audit = (await view(payments, thread_id))["audit"]
    assert [(a["kind"], a["digest"]) for a in audit] == [
        ("decision", digest(300)),
        ("permit", digest(300)),
    ]

    # The owner's own edit likewise.
    thread_id, (small,) = await ask(payments, "pay bob 50")
    before = await view(payments, thread_id)
    over = {"approved": True, "editedArgs": {"payee": "bob", "amount": 500}}
    events = await post_run(payments.http, AGENT, resume(thread_id, "r2", entry(small, over)))
    assert events[-1]["code"] == "POLICY_EXCEEDED"
    assert await view(payments, thread_id) == before
    within = {"approved": True, "editedArgs": {"payee": "bob", "amount": 80}}
    events = await post_run(payments.http, AGENT, resume(thread_id, "r3", entry(small, within)))
    assert json.loads(tool_result(events)) == {
        "editedArgs": {"payee": "bob", "amount": 80},
        "editedBy": [OWNER],
        "result": {"paid": 80, "to": "bob"},
    }


async def test_an_approval_of_other_arguments_starts_the_count_again(payments: Stack) -> None:
    thread_id, (payment,) = await ask(payments, "pay bob 20000")
    edited = {"approved": True, "editedArgs": {"payee": "bob", "amount": 15000}}
    await decide(payments.url, thread_id, payment, "carol", FINANCE)
    restarted = await decide(payments.url, thread_id, payment, "dave", FINANCE, payload=edited)
    assert (restarted.json()["outcome"], restarted.json()["received"]) == ("pending", 1)
    (shown,) = (await view(payments, thread_id))["interrupts"]
    assert approvers(shown)["approvedBy"] == ["dave"]

    settled = await decide(payments.url, thread_id, payment, "carol", FINANCE, payload=edited)
    assert settled.json()["decidedBy"] == ["dave", "carol"], settled.text
    events = await settled_run(payments, thread_id, settled.json()["runId"])
    assert json.loads(tool_result(events))["result"] == {"paid": 15000, "to": "bob"}
    audit = (await view(payments, thread_id))["audit"]
    assert [(a["kind"], a["principal"], a["outcome"], a["digest"]) for a in audit] == [
        ("decision", "carol", "superseded", digest(20000)),
        ("decision", "dave", "applied", digest(15000)),
        ("decision", "carol", "applied", digest(15000)),
        ("permit", None, "applied", digest(15000)),
    ]


async def test_a_tool_that_refuses_its_permit_is_audited(payments: Stack) -> None:
    thread_id, (refunding,) = await ask(payments, "refund bob 20")
    events = await post_run(payments.http, AGENT, resume(thread_id, "r2", entry(refunding)))
    assert events[-1]["code"] == "PERMIT_MISMATCH"
    audit = (await view(payments, thread_id))["audit"]
    assert [(a["kind"], a["outcome"], a["errorCode"]) for a in audit] == [
        ("decision", "applied", None),
        ("permit", "applied", None),
        ("permit", "rejected", "PERMIT_MISMATCH"),
    ]
    assert audit[2]["digest"] == digest(20) == audit[1]["digest"]


@pytest.mark.parametrize(
    ("body", "headers", "status", "code"),
    [
        ("{", {"content-type": "application/json"}, 400, "MALFORMED_JSON"),
        ('{"status": "resolved"}', {"content-type": "text/plain"}, 415, "UNSUPPORTED_MEDIA_TYPE"),
        ('{"status": "maybe"}', {"content-type": "application/json"}, 422, "INVALID_DECISION"),
        (
            '{"status": "cancelled", "extra": 1}',
            {"content-type": "application/json"},
            422,
            "INVALID_DECISION",
        ),
        ('{"status": "resolved"}', {"content-type": "application/json"}, 422, "MISSING_PAYLOAD"),
        (
            '{"status": "resolved", "payload": {"approved": "yes"}}',
            {"content-type": "application/json"},
            422,
            "INVALID_PAYLOAD",
        ),
    ],
)
async def test_a_decision_the_thread_cannot_take_changes_nothing(
    payments: Stack, body: str, headers: dict[str, str], status: int, code: str
) -> None:
    thread_id, (payment,) = await ask(payments, "pay bob 500")
    before = await view(payments, thread_id)
    async with httpx.AsyncClient(base_url=payments.url, headers=bearer("carol", FINANCE)) as http:
        response = await http.post(
            f"/threads/{thread_id}/interrupts/{payment['id']}/decisions",
            content=body,
            headers=headers,
        )
    assert response.status_code == status, response.text
    assert response.json()["error"]["code"] == code
    assert await view(payments, thread_id) == before


async def test_decisions_on_what_is_not_there(payments: Stack) -> None:
    thread_id, (payment,) = await ask(payments, "pay bob 500")
    unknown = {"id": "int-nope"}
    cases = [
        (new_thread(), payment, 404, "UNKNOWN_THREAD"),
        (thread_id, unknown, 404, "UNKNOWN_INTERRUPT"),
        (thread_id, {"id": ".bad"}, 422, "INVALID_PARAMETER"),
    ]
    for thread, interrupt, status, code in cases:
        response = await decide(payments.url, thread, interrupt, "carol", FINANCE)
        assert response.status_code == status, response.text
        assert response.json()["error"]["code"] == code
    async with httpx.AsyncClient(base_url=payments.url) as anonymous:
        response = await anonymous.post(
            f"/threads/{thread_id}/interrupts/{payment['id']}/decisions",
            json={"status": "cancelled"},
        )
    assert response.status_code == 401


async def test_half_collected_approvals_survive_a_worker_restart(client: Client) -> None:
    settings = Settings(task_queue=f"tq-{uuid.uuid4()}", auth_hs256_secret=TEST_SECRET)
    async with serve_gateway(settings, client, [APPROVALS]) as url, gateway_client(url) as http:
        stack = Stack(client=client, task_queue=settings.task_queue, http=http, url=url)
        async with build_worker(client, settings, [APPROVALS]):
            thread_id, (payment,) = await ask(stack, "pay bob 20000")
            pending = await decide(url, thread_id, payment, "carol", FINANCE)
            assert pending.json()["outcome"] == "pending", pending.text
        # A new worker replays the thread (continued as new after its first run).
        async with build_worker(client, settings, [APPROVALS]):
            handle = thread_handle(client, thread_id)
            assert (await handle.describe()).run_id != handle.first_execution_run_id
            settled = await decide(url, thread_id, payment, "dave", FINANCE)
            assert settled.json()["decidedBy"] == ["carol", "dave"], settled.text
            events = await settled_run(stack, thread_id, settled.json()["runId"])
            assert tool_result(events) == '{"paid": 20000, "to": "bob"}'


async def test_an_unsettled_approval_escalates_after_a_day_across_continue_as_new(
    skipping: WorkflowEnvironment, receiver: Receiver
) -> None:
    async with serve_stack(
        skipping.client, agents=[APPROVALS], reminder_webhook_url=receiver.url
    ) as stack:
        thread_id = new_thread()
        handle = await start_thread(
            skipping.client, stack.task_queue, thread_id, continue_after=1, agent=AGENT
        )

        # The test waits for each continue-as-new by describing the workflow, not by
        # reading the thread through the gateway meanwhile: the time-skipping test server
        # loses a query that reaches a run during the workflow task that continues it as
        # new (it hands the query to the worker of the finished run, which has dropped
        # that run, and refuses the worker's answer), so such a read waits out the
        # gateway's timeout and answers 503. A dev server answers it from the new run.
        # Described raw: that server keeps an unset search attribute (AguiNextExpiry once
        # nothing can expire) as an empty value, which the SDK's describe() cannot decode.
        async def current_run() -> str:
            described = await skipping.client.workflow_service.describe_workflow_execution(
                DescribeWorkflowExecutionRequest(
                    namespace=skipping.client.namespace,
                    execution=WorkflowExecution(workflow_id=handle.id),
                )
            )
            return described.workflow_execution_info.execution.run_id

        async def continued_as_new(since: str) -> None:
            async def moved() -> bool:
                return await current_run() != since

            await eventually(moved, what="the thread to continue as new")

        started_in = await current_run()
        body = run_input(thread_id, "r1", "pay bob 20000, hold")
        reply = await handle.execute_update(
            ThreadWorkflow.run_agent,
            RunRequest.model_validate({"agent": AGENT, "input": body, "principal": OWNER}),
        )
        await continued_as_new(started_in)
        finished = reply.events[-1].event
        assert isinstance(finished, RunFinishedEvent)
        assert isinstance(finished.outcome, RunFinishedInterruptOutcome)
        payment, _ = (i.model_dump(mode="json", by_alias=True) for i in finished.outcome.interrupts)

        assert (await decide(stack.url, thread_id, payment, "carol", FINANCE)).status_code == 200
        # Before the day, the CFO is no approver.
        early = await decide(stack.url, thread_id, payment, "erin", ["cfo"])
        assert early.status_code == 403, early.text

        # The hold expires after an hour: the thread runs, and continues as new with
        # carol's approval carried.
        continued_from = await current_run()
        await skipping.sleep(timedelta(hours=1, minutes=1))
        await continued_as_new(continued_from)
        thread = await view(stack, thread_id)
        expired = thread["runs"][-1]
        assert str(expired["runId"]).startswith("expiry-"), expired
        assert expired["status"] != "running", expired
        (shown,) = thread["interrupts"]
        assert approvers(shown)["approvedBy"] == ["carol"]
        assert receiver.deliveries == []

        await skipping.sleep(timedelta(days=1))
        (notice,) = await receiver.wait_for(1)
        (shown,) = (await view(stack, thread_id))["interrupts"]
        assert approvers(shown)["escalation"]["escalated"] is True
        assert notice.body == {
            "type": "interrupt.escalated",
            "threadId": thread_id,
            "agent": AGENT,
            "interrupt": shown,
            "escalatedTo": {"users": [], "groups": ["cfo"]},
        }
        assert notice.idempotency_key == f"{thread_id}/{payment['id']}/escalated"

        decided_in = await current_run()
        late = await decide(stack.url, thread_id, payment, "erin", ["cfo"])
        assert late.json()["decidedBy"] == ["carol", "erin"], late.text
        await continued_as_new(decided_in)
        events = await settled_run(stack, thread_id, late.json()["runId"])
        results = [e["content"] for e in events if e["type"] == "TOOL_CALL_RESULT"]
        assert sorted(results) == [
            "Not run: the question was expired.",
            '{"paid": 20000, "to": "bob"}',
        ]
