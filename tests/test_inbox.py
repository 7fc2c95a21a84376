"""``GET /interrupts`` and ``GET /threads``: what waits on whom, through visibility."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import httpx
from temporalio.client import Client

from tests.helpers import bearer, eventually, new_thread, post_run, run_input, serve_stack
from workflows.agents import EXAMPLES
from workflows.approvers import METADATA_KEY
from workflows.sdk import (
    AgentContext,
    AgentDefinition,
    Approvers,
    Ask,
    ChatReply,
    Escalation,
    ScriptedModel,
)
from workflows.thread_ids import workflow_id_for


async def _start(http: httpx.AsyncClient, text: str, **extra: Any) -> tuple[str, list[Any]]:
    thread_id = new_thread()
    events = await post_run(http, "demo", run_input(thread_id, "r1", text, **extra))
    return thread_id, events[-1]["outcome"].get("interrupts", [])


async def _get(http: httpx.AsyncClient, url: str, **params: Any) -> Any:
    response = await http.get(url, params=params)
    assert response.status_code == 200, response.text
    return response.json()


async def test_the_inbox_lists_open_interrupts_soonest_deadline_first(client: Client) -> None:
    # A task queue of its own: the gateway lists only its own queue's threads.
    async with serve_stack(client) as stack:
        http = stack.http
        soon, (soon_form,) = await _start(
            http, "quarterly", forwardedProps={"expiresInSeconds": 3600}
        )
        later, (approval, later_form) = await _start(http, "mail a@example.com, quarterly")
        confirming, (confirm,) = await _start(http, "confirm")
        idle, _ = await _start(http, "hello")

        undated = sorted(
            [(later, approval), (confirming, confirm)], key=lambda p: (p[0], p[1]["id"])
        )
        expected = [(soon, soon_form), (later, later_form), *undated]

        async def listed() -> bool:
            page = await _get(http, "/interrupts")
            return [(i["threadId"], i["interrupt"]) for i in page["interrupts"]] == expected

        await eventually(listed, what="the inbox to list every open interrupt")
        page = await _get(http, "/interrupts")
        assert "nextCursor" not in page
        assert {item["agent"] for item in page["interrupts"]} == {"demo"}

        # Filtered by reason, and by agent.
        approvals = await _get(http, "/interrupts", reason="tool_call")
        assert [i["interrupt"] for i in approvals["interrupts"]] == [approval]
        assert (await _get(http, "/interrupts", agent="demo")) == page

        # Paged: two at a time, with a cursor, the same list.
        first = await _get(http, "/interrupts", limit=2)
        second = await _get(http, "/interrupts", limit=2, cursor=first["nextCursor"])
        assert "nextCursor" not in second
        assert first["interrupts"] + second["interrupts"] == page["interrupts"]

        # Threads, with their status; paged by visibility's token.
        statuses = {soon: "waiting", later: "waiting", confirming: "waiting", idle: "idle"}

        async def all_threads() -> bool:
            listed = await _get(http, "/threads")
            return {t["threadId"]: t["status"] for t in listed["threads"]} == statuses

        await eventually(all_threads, what="the threads to be listed")
        waiting = await _get(http, "/threads", status="waiting")
        assert {t["threadId"]: t["openInterrupts"] for t in waiting["threads"]} == {
            soon: 1,
            later: 2,
            confirming: 1,
        }
        paged: list[Any] = []
        token = None
        while True:
            params = {"pageSize": 3} | ({"pageToken": token} if token else {})
            listed = await _get(http, "/threads", **params)
            paged += listed["threads"]
            token = listed["nextPageToken"]
            if token is None:
                break
        assert sorted(t["threadId"] for t in paged) == sorted(statuses)


async def test_bad_filters_and_cursors_are_clear_errors(client: Client) -> None:
    async with serve_stack(client) as stack:
        cases = [
            ("/interrupts", {"reason": 'tool_call" OR "1"="1'}, "INVALID_FILTER"),
            ("/interrupts", {"agent": "nobody"}, "INVALID_FILTER"),
            ("/interrupts", {"cursor": "not-a-cursor"}, "INVALID_CURSOR"),
            ("/threads", {"pageToken": "%%%"}, "INVALID_CURSOR"),
            ("/threads", {"pageToken": "bm90LWEtdG9rZW4="}, "INVALID_CURSOR"),
        ]
        for url, params, code in cases:
            response = await stack.http.get(url, params=params)
            assert response.status_code == 422, (url, params, response.text)
            assert response.json()["error"]["code"] == code
        response = await stack.http.get("/threads", params={"status": "sleeping"})
        assert response.status_code == 422


# --- approvers: who may decide, whoever asked -----------------------------------------------


async def ask_approvers(ctx: AgentContext) -> None:
    """Ask one question whose approvers are ``forwardedProps.approvers`` (an
    ``Approvers``), shown in its metadata as the thread shows every interrupt's, with
    ``forwardedProps.reason`` as its reason."""
    props = ctx.input.forwarded_props or {}
    policy = Approvers.model_validate(props["approvers"])
    view = policy.view(ctx.turn.thread.owner, ctx.now())
    ask: Ask[bool] = Ask(
        props.get("reason", "tool_call"),
        message="Approve?",
        response=bool,
        metadata={METADATA_KEY: view.model_dump(mode="json", by_alias=True)},
        approvers=policy,
    )
    await ctx.interrupt_all([ask])
    ctx.say("Done.")


ESCALATES_SOON = timedelta(seconds=1)
"""An escalation due a moment after the question (a policy's delay must be positive)."""
APPROVING = AgentDefinition(
    name="approving",
    description="Asks a question whose approvers the run's forwardedProps name.",
    model=ScriptedModel("approving", lambda request: ChatReply(text="unused")),
    turn=ask_approvers,
)


async def _ask(http: httpx.AsyncClient, reason: str, approvers: Approvers) -> str:
    thread_id = new_thread()
    props = {"reason": reason, "approvers": approvers.model_dump(mode="json", by_alias=True)}
    events = await post_run(
        http, "approving", run_input(thread_id, "r1", "go", forwardedProps=props)
    )
    assert events[-1]["outcome"]["type"] == "interrupt", events[-1]
    return thread_id


async def _inbox(http: httpx.AsyncClient, **params: Any) -> dict[str, Any]:
    """The caller's inbox with ``params``, by thread id (one interrupt per thread here)."""
    page = await _get(http, "/interrupts", **params)
    items = {item["threadId"]: item for item in page["interrupts"]}
    assert len(items) == len(page["interrupts"])
    return items


async def test_approvers_see_what_they_may_decide_and_owners_what_they_asked(
    client: Client,
) -> None:
    async with serve_stack(client, agents=[*EXAMPLES, APPROVING]) as stack:
        # alice asks everything; she is in finance herself.
        alice = stack.http
        alice.headers.update(bearer("alice", ["finance"]))
        finance = await _ask(alice, "payment", Approvers(groups=["finance"]))
        separated = await _ask(
            alice, "payment", Approvers(groups=["finance"], exclude_requester=True)
        )
        escalated = await _ask(
            alice,
            "review",
            Approvers(users=["dave"], escalation=Escalation(after=ESCALATES_SOON, users=["boss"])),
        )
        not_yet = await _ask(
            alice,
            "review",
            Approvers(
                users=["dave"], escalation=Escalation(after=timedelta(days=300), users=["boss"])
            ),
        )
        own, _ = await _start(alice, "confirm")

        async with (
            _principal(stack.url, "bob", ["finance"]) as bob,
            _principal(stack.url, "carol", ["sales"]) as carol,
            _principal(stack.url, "boss", []) as boss,
        ):

            async def listed() -> bool:
                return set(await _inbox(bob)) == {finance, separated}

            await eventually(listed, what="the inbox to list finance's interrupts")

            # bob decides for finance, on alice's threads.
            bobs = await _inbox(bob)
            assert {k: (v["owner"], v["mayDecide"], v["mine"]) for k, v in bobs.items()} == {
                finance: ("alice", True, False),
                separated: ("alice", True, False),
            }
            item = bobs[finance]
            assert item["agent"] == "approving"
            assert item["interrupt"]["reason"] == "payment"
            approvers = item["interrupt"]["metadata"]["approvers"]
            assert (approvers["groups"], approvers["needed"], approvers["received"]) == (
                ["finance"],
                1,
                0,
            )
            assert await _inbox(bob, role="decide") == bobs
            assert await _inbox(bob, role="mine") == {}
            # carol is in no group named: nothing; boss only once escalated.
            assert await _inbox(carol) == {}

            async def escalated_to_boss() -> bool:
                return set(await _inbox(boss)) == {escalated}

            await eventually(escalated_to_boss, what="the escalation to reach boss's inbox")
            bosses = await _inbox(boss)
            assert set(bosses) == {escalated}
            assert bosses[escalated]["mayDecide"] and not bosses[escalated]["mine"]

            # alice: her own threads, and what she may decide of them (not what she may
            # not approve herself).
            alices = await _inbox(alice)
            assert {k: (v["mayDecide"], v["mine"]) for k, v in alices.items()} == {
                finance: (True, True),
                separated: (False, True),
                escalated: (False, True),
                not_yet: (False, True),
                own: (True, True),
            }
            assert set(await _inbox(alice, role="decide")) == {finance, own}
            assert set(await _inbox(alice, role="mine")) == set(alices)

            # Roles combine with the agent and reason filters.
            assert await _inbox(bob, agent="demo") == {}
            assert set(await _inbox(bob, agent="approving", reason="payment")) == {
                finance,
                separated,
            }
            assert await _inbox(bob, reason="review") == {}
            assert set(await _inbox(boss, role="decide", reason="review")) == {escalated}
            assert await _inbox(boss, role="decide", reason="payment") == {}
            assert set(await _inbox(alice, role="mine", agent="demo")) == {own}
            assert set(await _inbox(alice, role="decide", reason="payment")) == {finance}
            assert set(await _inbox(alice, role="mine", reason="review")) == {escalated, not_yet}

        # Operators find the threads waiting on a group, as the inbox does.
        query = f'TaskQueue = "{stack.task_queue}" AND AguiApprovers = "g:finance"'
        found = {execution.id async for execution in client.list_workflows(query)}
        assert found == {workflow_id_for(finance), workflow_id_for(separated)}


def _principal(url: str, subject: str, groups: list[str]) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=url, headers=bearer(subject, groups), timeout=30)
