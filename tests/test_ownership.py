"""A thread belongs to the principal whose token started it: nobody else can run on it,
read it or find it, and a refused run leaves its history as it was. Admins read every
thread, but cannot answer for its owner. A provider's RS256 tokens work end to end."""

from __future__ import annotations

from typing import Any

from temporalio.client import Client

from gateway.tokens import mint
from tests.helpers import (
    TEST_SECRET,
    Stack,
    at_rest,
    bearer,
    gateway_client,
    history_length,
    new_thread,
    post_run,
    run_input,
    serve_stack,
)
from tests.jwks import AUDIENCE, ISSUER, Provider, serving


async def waiting_thread(stack: Stack) -> tuple[str, dict[str, Any]]:
    """A thread of alice's (the stack's principal) waiting on an approval."""
    thread_id = new_thread()
    events = await post_run(stack.http, "demo", run_input(thread_id, "r1", "mail a@example.com"))
    [approval] = events[-1]["outcome"]["interrupts"]
    return thread_id, approval


def approving(thread_id: str, approval: dict[str, Any]) -> dict[str, Any]:
    entry = {"interruptId": approval["id"], "status": "resolved", "payload": {"approved": True}}
    return {"threadId": thread_id, "runId": "r2", "messages": [], "resume": [entry]}


async def test_another_principal_is_told_the_thread_does_not_exist(client: Client) -> None:
    async with serve_stack(client) as stack, gateway_client(stack.url, "mallory") as mallory:
        thread_id, approval = await waiting_thread(stack)
        await at_rest(client, thread_id)
        before = await history_length(client, thread_id)

        # Answering it: rejected as if there were no thread, and nothing was written.
        events = await post_run(mallory, "demo", approving(thread_id, approval))
        assert [e["type"] for e in events] == ["RUN_STARTED", "RUN_ERROR"]
        assert events[-1]["code"] == "UNKNOWN_THREAD"
        assert await history_length(client, thread_id) == before
        # Reading it, its run's events or following it: the 404 of a thread that does
        # not exist.
        for path in (
            f"/threads/{thread_id}",
            f"/threads/{thread_id}/runs/r1/events",
            f"/threads/{thread_id}/events",
        ):
            mine = await mallory.get(path)
            nobodys = await mallory.get(path.replace(thread_id, new_thread()))
            assert mine.status_code == nobodys.status_code == 404
            assert mine.json()["error"]["code"] == nobodys.json()["error"]["code"]
        # Listing: none of it.
        threads = (await mallory.get("/threads")).json()["threads"]
        assert thread_id not in {t["threadId"] for t in threads}
        inbox = (await mallory.get("/interrupts")).json()["interrupts"]
        assert approval["id"] not in {i["interrupt"]["id"] for i in inbox}

        # The owner still finds it, answers it, and sees who sent each run.
        assert approval["id"] in {
            i["interrupt"]["id"] for i in (await stack.http.get("/interrupts")).json()["interrupts"]
        }
        done = await post_run(stack.http, "demo", approving(thread_id, approval))
        assert done[-1]["outcome"] == {"type": "success"}
        view = (await stack.http.get(f"/threads/{thread_id}")).json()
        assert view["owner"] == "alice"
        assert [run["sentBy"] for run in view["runs"]] == ["alice", "alice"]


async def test_an_admin_reads_every_thread_but_cannot_answer_for_its_owner(
    client: Client,
) -> None:
    async with serve_stack(client) as stack:
        thread_id, approval = await waiting_thread(stack)
        admin = bearer("root", ["agui-admins"])
        view = await stack.http.get(f"/threads/{thread_id}", headers=admin)
        assert view.status_code == 200 and view.json()["owner"] == "alice"
        listed = (await stack.http.get("/interrupts", headers=admin)).json()["interrupts"]
        assert approval["id"] in {i["interrupt"]["id"] for i in listed}

        async with gateway_client(stack.url, "root") as root:
            root.headers.update(admin)
            events = await post_run(root, "demo", approving(thread_id, approval))
        assert events[-1]["code"] == "UNKNOWN_THREAD"
        view = await stack.http.get(f"/threads/{thread_id}")
        assert [i["id"] for i in view.json()["interrupts"]] == [approval["id"]]


async def test_a_thread_id_taken_by_another_principal_is_not_theirs_to_start(
    client: Client,
) -> None:
    async with serve_stack(client) as stack, gateway_client(stack.url, "mallory") as mallory:
        thread_id, _ = await waiting_thread(stack)
        events = await post_run(mallory, "demo", run_input(thread_id, "m1", "hello"))
        assert events[-1]["code"] == "UNKNOWN_THREAD"


async def test_a_providers_rs256_token_runs_an_agent_end_to_end(client: Client) -> None:
    with serving(Provider()) as provider:
        async with serve_stack(
            client,
            auth_hs256_secret=None,
            auth_jwks_url=provider.url,
            auth_issuer=ISSUER,
            auth_audience=AUDIENCE,
        ) as stack:
            carol = {"Authorization": f"Bearer {provider.token(sub='carol')}"}
            thread_id = new_thread()
            response = await stack.http.post(
                "/agents/demo", json=run_input(thread_id, "r1", "hi"), headers=carol
            )
            assert response.status_code == 200 and "RUN_FINISHED" in response.text
            view = await stack.http.get(f"/threads/{thread_id}", headers=carol)
            assert view.json()["owner"] == "carol"
            # The shared secret's tokens mean nothing to a gateway that trusts a provider.
            secret_token = {"Authorization": f"Bearer {mint(TEST_SECRET, 'carol')}"}
            refused = await stack.http.get(f"/threads/{thread_id}", headers=secret_token)
            assert refused.status_code == 401
