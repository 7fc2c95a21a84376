"""Reminders before an interrupt's deadline reach a webhook, days later, on time.

Time-skipping test server for the days; a real local HTTP receiver for the webhook.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

import pytest
from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from settings import CONTINUE_AS_NEW_AFTER_RUNS, Settings
from tests.helpers import LONG_LIVED, OWNER, free_port, run_input, start_thread
from tests.receiver import Receiver
from worker import build_worker
from workflows.agents import EXAMPLES
from workflows.models import RunRequest
from workflows.thread import ThreadWorkflow
from workflows.thread_ids import thread_id_of

FORM_LIFETIME = timedelta(days=3)
"""The demo form's default deadline; the demo agent reminds one day before it."""
MINUTE = timedelta(minutes=1)

Thread = WorkflowHandle[ThreadWorkflow, None]


async def _ask_form(
    env: WorkflowEnvironment,
    settings: Settings,
    continue_after: int = CONTINUE_AS_NEW_AFTER_RUNS,
    **forwarded: Any,
) -> tuple[Thread, dict[str, Any]]:
    """Start a thread whose first run asks the demo's quarterly form; the form as JSON."""
    thread_id = f"thread-{uuid.uuid4()}"
    handle = await start_thread(env.client, settings.task_queue, thread_id, continue_after)
    body = run_input(thread_id, "r1", "quarterly", forwardedProps=forwarded)
    reply = await handle.execute_update(
        ThreadWorkflow.run_agent,
        RunRequest.model_validate({"agent": "demo", "input": body, "principal": OWNER}),
    )
    (form,) = reply.events[-1].event.outcome.interrupts  # type: ignore[union-attr]
    return handle, form.model_dump(mode="json", by_alias=True, exclude_none=True)


async def _answer(handle: Thread, form: dict[str, Any]) -> None:
    filing = {"quarter": "Q1", "year": 2027, "revenue": 10}
    body = {
        "threadId": thread_id_of(handle.id),
        "runId": "r2",
        "messages": [],
        "resume": [{"interruptId": form["id"], "status": "resolved", "payload": filing}],
    }
    await handle.execute_update(
        ThreadWorkflow.run_agent,
        RunRequest.model_validate({"agent": "demo", "input": body, "principal": OWNER}),
    )


def _deadline(form: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(form["expiresAt"].replace("Z", "+00:00"))


def _settings(webhook: str | None) -> Settings:
    return Settings(task_queue=f"tq-{uuid.uuid4()}", reminder_webhook_url=webhook)


@pytest.mark.parametrize("continue_after", [LONG_LIVED, 1], ids=["same-run", "continued-as-new"])
async def test_the_agents_reminder_arrives_a_day_before_the_deadline(
    skipping: WorkflowEnvironment, receiver: Receiver, continue_after: int
) -> None:
    settings = _settings(receiver.url)
    async with build_worker(skipping.client, settings, EXAMPLES):
        handle, form = await _ask_form(skipping, settings, continue_after)

        await skipping.sleep(FORM_LIFETIME - timedelta(days=1) - MINUTE)
        assert receiver.deliveries == []
        await skipping.sleep(2 * MINUTE)
        (delivery,) = await receiver.wait_for(1)

        remind_at = _deadline(form) - timedelta(days=1)
        assert delivery.path == "/hook"
        assert delivery.body == {
            "type": "interrupt.reminder",
            "threadId": thread_id_of(handle.id),
            "agent": "demo",
            "interrupt": form,
            "expiresAt": form["expiresAt"],
            "remindAt": remind_at.isoformat().replace("+00:00", "Z"),
        }
        thread_id = delivery.body["threadId"]
        assert delivery.idempotency_key == f"{thread_id}/{form['id']}/{remind_at.isoformat()}"
        # A reminder only reminds: the form is still open, then expires as always.
        view = await handle.query(ThreadWorkflow.view)
        assert [i.id for i in view.interrupts] == [form["id"]]
        continued = (await handle.describe()).run_id != handle.first_execution_run_id
        assert continued == (continue_after == 1)
        await skipping.sleep(timedelta(days=1))
        assert (await handle.query(ThreadWorkflow.view)).status == "idle"
        assert len(receiver.deliveries) == 1


async def test_an_interrupts_own_reminders_replace_the_agents_and_stop_once_answered(
    skipping: WorkflowEnvironment, receiver: Receiver
) -> None:
    settings = _settings(receiver.url)
    async with build_worker(skipping.client, settings, EXAMPLES):
        handle, form = await _ask_form(skipping, settings, remindBeforeSeconds=[7200, 3600])

        await skipping.sleep(FORM_LIFETIME - timedelta(hours=2) + MINUTE)
        (first,) = await receiver.wait_for(1)
        assert first.body["remindAt"] == (_deadline(form) - timedelta(hours=2)).isoformat().replace(
            "+00:00", "Z"
        )
        await _answer(handle, form)
        await skipping.sleep(timedelta(hours=3))
        # The one-hour reminder (and no one-day reminder) never went out.
        assert len(receiver.deliveries) == 1
        view = await handle.query(ThreadWorkflow.view)
        assert view.messages[-1].content == "Filed Q1 2027 with revenue 10."


async def test_a_failing_webhook_is_retried_with_the_same_key(
    skipping: WorkflowEnvironment, receiver: Receiver
) -> None:
    receiver.fail_next(3)
    settings = _settings(receiver.url)
    async with build_worker(skipping.client, settings, EXAMPLES):
        handle, form = await _ask_form(skipping, settings)
        await skipping.sleep(FORM_LIFETIME - timedelta(days=1) + MINUTE)
        # Three 503s, then the retry that is accepted: four attempts, one reminder.
        deliveries = await receiver.wait_for(4)
        assert len(receiver.keys()) == 1
        assert all(d.body == deliveries[0].body for d in deliveries)
        assert [i.id for i in (await handle.query(ThreadWorkflow.view)).interrupts] == [form["id"]]


@pytest.mark.parametrize("webhook", ["failing", "unreachable"])
async def test_a_webhook_that_never_answers_changes_nothing_on_the_thread(
    skipping: WorkflowEnvironment, receiver: Receiver, webhook: str
) -> None:
    receiver.fail_next(10**9)
    url = receiver.url if webhook == "failing" else f"http://127.0.0.1:{free_port()}/hook"
    settings = _settings(url)
    async with build_worker(skipping.client, settings, EXAMPLES):
        # Reminded half an hour before the deadline, so retried for half an hour: a dozen
        # attempts, where the agent's day before would be some 150, each taking real time.
        handle, form = await _ask_form(skipping, settings, remindBeforeSeconds=[1800])
        await skipping.sleep(FORM_LIFETIME + MINUTE)
        view = await handle.query(ThreadWorkflow.view)
        # The form expired on time, the agent went on, and the thread takes new input.
        assert view.interrupts == []
        assert view.messages[-1].content == "Quarterly filing: expired, nothing filed."
        assert view.status == "idle"
        if webhook == "failing":
            # Retried with backoff until the deadline, then given up.
            assert len(receiver.deliveries) > 2
            assert len(receiver.keys()) == 1
