"""A run records its state only when its thread lacks it (``workflows/known_state.py``):
the gateway sends the thread the digest of the state the client echoes, and the
thread's reply carries each ``STATE_SNAPSHOT`` as a patch; the client still gets every
snapshot whole. A client whose state is not the thread's, and a thread on a build that
predates the digest, get the run sent whole, and the client's state is taken in."""

from __future__ import annotations

import copy
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from ag_ui.core import CustomEvent, StateSnapshotEvent
from hypothesis import given
from hypothesis import strategies as st
from temporalio import workflow
from temporalio.client import Client

from tests.helpers import EchoingClient, Stack, serve_stack
from tests.test_deploys import failed_workflow_tasks
from tests.test_known_messages import recorded_runs
from workflows import budgets, known_state
from workflows.models import SequencedEvent
from workflows.thread import ThreadWorkflow


def state_snapshots(events: list[dict[str, Any]]) -> list[Any]:
    return [event["snapshot"] for event in events if event["type"] == "STATE_SNAPSHOT"]


def outbox(state: dict[str, Any]) -> list[str]:
    return [mail["to"] for mail in state.get("outbox", [])]


async def test_a_run_records_no_state_the_client_echoes_and_the_client_gets_it_whole(
    stack: Stack, client: Client
) -> None:
    user = EchoingClient(stack.http)
    await user.mail("a@b.com")
    echoed = user.state
    resumed = await user.mail("c@d.com")

    # The client got the state whole, as the thread has it.
    assert state_snapshots(resumed)[-1] == await user.thread_state()
    assert outbox(user.state) == ["a@b.com", "c@d.com"]

    runs = await recorded_runs(client, user.thread_id)
    assert len(runs) == 4
    # The first cycle's client had no state to send back: both runs went whole.
    for request, reply in runs[:2]:
        assert request.known_state is None and reply.state_patches is None
    # The second cycle's runs left the state out, and their replies the snapshots.
    for request, reply in runs[2:]:
        assert request.known_state == known_state.digest(echoed)
        assert request.input.state is None
        assert reply.state_patches is not None
        recorded = [i.event for i in reply.events if isinstance(i.event, StateSnapshotEvent)]
        assert recorded and all(event.snapshot is None for event in recorded)
    # The pause left the state as it was; the resume added one mail, and only it.
    (_, paused), (_, sent) = runs[2:]
    assert paused.state_patches == [[]]
    [[added]] = sent.state_patches or []
    assert added["op"] == "add" and added["value"]["to"] == "c@d.com"
    assert b"a@b.com" not in budgets.to_json([sent.state_patches, runs[3][0]])


async def test_a_client_whose_state_is_not_the_threads_gets_it_taken_in(
    stack: Stack, client: Client
) -> None:
    user = EchoingClient(stack.http)
    await user.mail("a@b.com")
    # The client edits its copy: it forgets the mail it sent.
    user.state = {"outbox": [], "filings": []}
    paused = await user.run("hello")
    assert state_snapshots(paused)[-1] == {"outbox": [], "filings": []}
    assert await user.thread_state() == {"outbox": [], "filings": []}

    request, reply = (await recorded_runs(client, user.thread_id))[-1]
    # The run went whole (the first send, rejected, left nothing) and its reply too.
    assert request.known_state is None
    assert request.input.state == {"outbox": [], "filings": []}
    assert reply.state_patches is None


@pytest.fixture
def older_build() -> Iterator[None]:
    """Workers made meanwhile serve the thread as a build before ``known_state`` did:
    without the update :data:`known_state.RUN_ON_KNOWN_STATE`. (The workflow package is
    passed through the sandbox, so its workers read this very definition.)"""
    definition = workflow._Definition.must_from_class(ThreadWorkflow)
    handler = definition.updates.pop(known_state.RUN_ON_KNOWN_STATE)
    try:
        yield
    finally:
        definition.updates[known_state.RUN_ON_KNOWN_STATE] = handler


async def test_a_thread_on_a_build_without_the_digest_gets_the_run_whole(
    client: Client, older_build: None
) -> None:
    async with serve_stack(client, f"tq-{uuid.uuid4()}") as stack:
        user = EchoingClient(stack.http)
        await user.mail("a@b.com")
        # Were the digest ignored, the thread would keep the mail the client dropped.
        user.state = {"outbox": [], "filings": []}
        resumed = await user.mail("c@d.com")

        assert outbox(state_snapshots(resumed)[-1]) == ["c@d.com"]
        assert outbox(await user.thread_state()) == ["c@d.com"]
        runs = await recorded_runs(client, user.thread_id)
        assert all(request.known_state is None for request, _ in runs)
        assert runs[2][0].input.state == {"outbox": [], "filings": []}
        assert await failed_workflow_tasks(client, user.thread_id) == 0


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=3), children, max_size=4)
    ),
    max_leaves=12,
)
STATES = st.dictionaries(st.text(max_size=3), JSON, min_size=1, max_size=4)


@given(base=STATES, states=st.lists(STATES, min_size=1, max_size=4))
def test_snapshots_left_out_are_made_whole_again(
    base: dict[str, Any], states: list[dict[str, Any]]
) -> None:
    events = []
    for seq, state in enumerate(states, start=1):
        events.append(
            SequencedEvent(seq=2 * seq, run_key="k", event=StateSnapshotEvent(snapshot=state))
        )
        other = CustomEvent(name="between", value=seq)
        events.append(SequencedEvent(seq=2 * seq + 1, run_key="k", event=other))

    kept, patches = known_state.leave_out(events, budgets.to_json(base))

    assert len(patches) == len(states)
    assert all(
        item.event.snapshot is None for item in kept if isinstance(item.event, StateSnapshotEvent)
    )
    before = copy.deepcopy(base)
    assert known_state.fill_in(kept, base, patches) == events
    assert base == before
    # The log's own patches, where it has them, are these.
    assert known_state.leave_out(events, budgets.to_json(base), patches) == (kept, patches)
