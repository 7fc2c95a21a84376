"""``GET /interrupts`` and ``GET /threads``: what waits on whom, through visibility."""

from __future__ import annotations

from typing import Any

import httpx
from temporalio.client import Client

from tests.helpers import eventually, new_thread, post_run, run_input, serve_stack


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
