"""Guards what the thread shows of itself (``workflows/view.py``): its status, and the
``view`` query's answer, from the thread's data and its run in progress alone."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import pytest
from ag_ui.core import Interrupt, ResumeEntry, UserMessage

from workflows.models import Answer, AuditRecord, RunRecord, ThreadState
from workflows.view import thread_status, thread_view

NOW = datetime(2026, 5, 1, 12, tzinfo=UTC)
RUN = RunRecord(key="u1", run_id="r1", started_at=NOW, first_seq=1)
FORM = Interrupt(id="i1", reason="input_required", message="Form")
CONFIRM = Interrupt(id="i2", reason="confirmation")


def thread(asked: Sequence[Interrupt] = (), answered: Sequence[Interrupt] = ()) -> ThreadState:
    return ThreadState(
        thread_id="t1",
        agent="demo",
        owner="alice",
        asked=list(asked),
        answers={i.id: Answer(interrupt=i, status="resolved") for i in answered},
    )


@pytest.mark.parametrize(
    ("state", "run", "status"),
    [
        (thread(), None, "idle"),
        (thread(asked=[FORM]), None, "waiting"),
        (thread(asked=[FORM, CONFIRM], answered=[FORM]), None, "waiting"),
        (thread(asked=[FORM], answered=[FORM]), None, "idle"),
        (thread(), RUN, "running"),
        (thread(asked=[FORM]), RUN, "running"),
    ],
    ids=[
        "nothing-asked",
        "open-interrupt",
        "one-of-two-answered",
        "all-answered",
        "run-in-progress",
        "run-in-progress-beats-waiting",
    ],
)
def test_status(state: ThreadState, run: RunRecord | None, status: str) -> None:
    assert thread_status(state, run) == status


def test_the_view_shows_the_thread_with_only_its_open_interrupts() -> None:
    state = thread(asked=[FORM, CONFIRM], answered=[FORM])
    state.messages.append(UserMessage(id="m1", content="hi"))
    state.state["draft"] = "v1"
    state.memory["trusted"] = ["read_file"]
    state.runs.append(RUN)
    state.audit.append(
        AuditRecord(
            at=NOW,
            operator="ops",
            resume=[ResumeEntry(interrupt_id="i1", status="resolved")],
            outcome="applied",
            run_id="operator-1",
        )
    )

    view = thread_view(state, None)

    assert (view.thread_id, view.agent, view.status) == ("t1", "demo", "waiting")
    assert view.interrupts == [CONFIRM]
    assert view.messages == state.messages
    assert view.state == {"draft": "v1"}
    assert view.memory == {"trusted": ["read_file"]}
    assert view.runs == [RUN]
    assert view.audit == state.audit


def test_the_view_of_a_running_thread_says_so() -> None:
    assert thread_view(thread(asked=[FORM]), RUN).status == "running"
