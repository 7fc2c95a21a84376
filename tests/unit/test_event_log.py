"""Guards the thread's event log (``workflows/event_log.py``): sequence numbers, a run's
events as a slice of the log, messages snapshots kept by length, state snapshots kept
as patches, a repeated run's events under its new ``runId``, and what a continue-as-new
carries.

The log reads the time only through the clock it is given, so these run it directly.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import jsonpatch
import pytest
from ag_ui.core import (
    PROTOCOL_VERSION,
    AssistantMessage,
    Event,
    MessagesSnapshotEvent,
    RunFinishedEvent,
    RunStartedEvent,
    StateSnapshotEvent,
    TextMessageContentEvent,
    UserMessage,
)
from hypothesis import given
from hypothesis import strategies as st

from workflows import budgets, known_state
from workflows.event_log import LOG_PAGE_BYTES, LOG_PAGE_EVENTS, EventLog, state_patch
from workflows.models import RunRecord, SequencedEvent, ThreadState

NOW = datetime(2026, 5, 1, 12, tzinfo=UTC)


def new_log() -> tuple[ThreadState, EventLog]:
    thread = ThreadState(thread_id="t1", agent="demo", owner="alice")
    return thread, EventLog(thread, clock=lambda: NOW)


def open_run(thread: ThreadState, log: EventLog, key: str) -> RunRecord:
    """A run as the thread opens one: recorded, its events to come next in the log."""
    run = RunRecord(key=key, run_id=f"run-{key}", started_at=NOW, first_seq=log.next_seq())
    thread.runs.append(run)
    return run


def text(delta: str) -> TextMessageContentEvent:
    return TextMessageContentEvent(message_id="m1", delta=delta)


def run_with_texts(thread: ThreadState, log: EventLog, key: str, *deltas: str) -> RunRecord:
    run = open_run(thread, log, key)
    for delta in deltas:
        log.append(run, text(delta))
    return run


def deltas(events: list[SequencedEvent]) -> list[str]:
    return [e.event.delta for e in events if isinstance(e.event, TextMessageContentEvent)]


def seqs(events: list[SequencedEvent]) -> list[int]:
    return [e.seq for e in events]


# --- append ----------------------------------------------------------------------------


def test_events_are_numbered_from_one_and_the_run_knows_its_last() -> None:
    thread, log = new_log()
    assert log.next_seq() == 1

    run = run_with_texts(thread, log, "u1", "a", "b")

    assert [item.seq for item in thread.events] == [1, 2]
    assert {item.run_key for item in thread.events} == {"u1"}
    assert (run.first_seq, run.last_seq) == (1, 2)
    assert log.next_seq() == 3


def test_an_event_without_a_timestamp_gets_the_clocks_and_one_with_keeps_its_own() -> None:
    thread, log = new_log()
    run = open_run(thread, log, "u1")
    stamped = text("a")
    stamped.timestamp = 42

    log.append(run, text("b"))
    log.append(run, stamped)

    assert [item.event.timestamp for item in thread.events] == [
        int(NOW.timestamp() * 1000),
        42,
    ]


# --- events_of -------------------------------------------------------------------------


def test_a_run_gets_its_own_events_only() -> None:
    thread, log = new_log()
    first = run_with_texts(thread, log, "u1", "a", "b")
    second = run_with_texts(thread, log, "u2", "c", "d", "e")

    assert deltas(log.events_of(first)) == ["a", "b"]
    assert deltas(log.events_of(second)) == ["c", "d", "e"]
    assert seqs(log.events_of(second)) == [3, 4, 5]


def test_after_skips_the_events_up_to_that_seq() -> None:
    thread, log = new_log()
    run_with_texts(thread, log, "u1", "a", "b")
    run = run_with_texts(thread, log, "u2", "c", "d", "e")

    assert seqs(log.events_of(run, after=3)) == [4, 5]
    assert seqs(log.events_of(run, after=1)) == [3, 4, 5]
    assert log.events_of(run, after=5) == []
    assert log.events_of(run, after=99) == []


def test_a_run_without_events_yet_has_none() -> None:
    thread, log = new_log()
    assert log.events_of(open_run(thread, log, "u0")) == []

    run_with_texts(thread, log, "u1", "a")
    empty = open_run(thread, log, "u2")

    assert log.events_of(empty) == []
    assert log.events_of(empty, after=1) == []


def test_a_run_in_progress_is_read_as_far_as_it_got() -> None:
    thread, log = new_log()
    run = run_with_texts(thread, log, "u1", "a")
    seen = log.events_of(run)

    log.append(run, text("b"))

    assert deltas(seen) == ["a"]
    assert deltas(log.events_of(run, after=seen[-1].seq)) == ["b"]


# --- carried ---------------------------------------------------------------------------


def test_a_continue_as_new_carries_the_last_runs_and_their_events_only() -> None:
    thread, log = new_log()
    thread.messages.append(UserMessage(id="m1", content="hi"))
    dropped = run_with_texts(thread, log, "u1", "a", "b")
    run_with_texts(thread, log, "u2", "c")
    run_with_texts(thread, log, "u3", "d", "e")

    carried = log.carried(2)

    assert [run.key for run in carried.runs] == ["u2", "u3"]
    assert seqs(carried.events) == [3, 4, 5]
    assert carried.messages == thread.messages
    assert [run.key for run in thread.runs] == ["u1", "u2", "u3"], "the thread is unchanged"
    assert dropped.key not in {run.key for run in carried.runs}


def test_a_carried_log_starting_at_a_later_seq_serves_its_runs_as_before() -> None:
    thread, log = new_log()
    run_with_texts(thread, log, "u1", "a", "b")
    run_with_texts(thread, log, "u2", "c")
    run_with_texts(thread, log, "u3", "d", "e")
    carried = log.carried(2)
    later = EventLog(carried, clock=lambda: NOW)
    second, third = carried.runs

    assert deltas(later.events_of(second)) == ["c"]
    assert seqs(later.events_of(third)) == [4, 5]
    assert seqs(later.events_of(third, after=4)) == [5]
    assert seqs(later.events_of(second, after=0)) == [3]
    assert later.next_seq() == 6


def test_a_run_whose_events_are_no_longer_carried_has_none() -> None:
    thread, log = new_log()
    dropped = [
        run_with_texts(thread, log, "u1", "a", "b"),
        run_with_texts(thread, log, "u2", "c"),
    ]
    run_with_texts(thread, log, "u3", "d", "e", "f")
    later = EventLog(log.carried(1), clock=lambda: NOW)

    for run in dropped:
        assert later.events_of(run) == []
        assert later.events_of(run, after=1) == []


def test_a_new_run_after_a_continue_as_new_numbers_on() -> None:
    thread, log = new_log()
    run_with_texts(thread, log, "u1", "a", "b")
    carried = log.carried(1)
    later = EventLog(carried, clock=lambda: NOW)

    run = run_with_texts(carried, later, "u2", "c")

    assert seqs(later.events_of(run)) == [3]


# --- the whole log, across runs ----------------------------------------------------------


def test_the_log_is_read_across_runs_after_any_seq() -> None:
    thread, log = new_log()
    run_with_texts(thread, log, "u1", "a", "b")
    run_with_texts(thread, log, "u2", "c")

    assert log.page(0) == (log.events_of(thread.runs[0]) + log.events_of(thread.runs[1]), False)
    assert deltas(log.page(1)[0]) == ["b", "c"]
    assert log.page(3) == ([], False)
    assert log.page(99) == ([], False)


def test_the_log_starts_at_the_oldest_event_carried() -> None:
    thread, log = new_log()
    run_with_texts(thread, log, "u1", "a", "b")
    run_with_texts(thread, log, "u2", "c", "d")
    later = EventLog(log.carried(1), clock=lambda: NOW)

    assert seqs(later.page(0)[0]) == [3, 4]
    assert seqs(later.page(1)[0]) == [3, 4]
    assert seqs(later.page(3)[0]) == [4]


def test_a_page_of_the_log_is_bounded_by_count_and_size_and_says_more_follow() -> None:
    thread, log = new_log()
    run_with_texts(thread, log, "u1", *("x" for _ in range(LOG_PAGE_EVENTS + 3)))

    page, more = log.page(0)
    assert (seqs(page), more) == (list(range(1, LOG_PAGE_EVENTS + 1)), True)
    assert seqs(log.page(LOG_PAGE_EVENTS)[0]) == [LOG_PAGE_EVENTS + i for i in (1, 2, 3)]

    big = "y" * (LOG_PAGE_BYTES // 3)
    run_with_texts(thread, log, "u2", big, big, big, big)
    after = LOG_PAGE_EVENTS + 3
    page, more = log.page(after)
    assert (len(page), more) == (2, True)
    assert sum(budgets.json_size(item) for item in page) <= LOG_PAGE_BYTES
    huge = "z" * LOG_PAGE_BYTES
    run_with_texts(thread, log, "u3", huge)
    assert deltas(log.page(after + 4)[0]) == [huge], "an event over the page size comes alone"


def test_the_log_reads_snapshots_with_their_messages() -> None:
    thread, log = new_log()
    thread.messages.append(UserMessage(id="m1", content="hi"))
    run = open_run(thread, log, "u1")
    log.append_messages_snapshot(run)

    [item] = log.page(0)[0]

    assert isinstance(item.event, MessagesSnapshotEvent)
    assert [m.id for m in item.event.messages] == ["m1"]


# --- messages snapshots ----------------------------------------------------------------


def test_a_messages_snapshot_is_logged_by_length_and_read_as_that_prefix() -> None:
    thread, log = new_log()
    thread.messages.append(UserMessage(id="m1", content="hi"))
    run = open_run(thread, log, "u1")

    log.append_messages_snapshot(run)
    thread.messages.append(AssistantMessage(id="m2", content="hello"))
    log.append_messages_snapshot(run)
    thread.messages.append(UserMessage(id="m3", content="and?"))

    logged = thread.events
    assert [item.messages_upto for item in logged] == [1, 2]
    assert all(
        isinstance(item.event, MessagesSnapshotEvent) and item.event.messages == []
        for item in logged
    )
    snapshots = [e.event for e in log.events_of(run) if isinstance(e.event, MessagesSnapshotEvent)]
    assert [[m.id for m in event.messages] for event in snapshots] == [["m1"], ["m1", "m2"]]


def test_reading_a_snapshot_leaves_the_log_without_messages() -> None:
    thread, log = new_log()
    thread.messages.append(UserMessage(id="m1", content="hi"))
    run = open_run(thread, log, "u1")
    log.append_messages_snapshot(run)

    log.events_of(run)

    event = thread.events[0].event
    assert isinstance(event, MessagesSnapshotEvent) and event.messages == []


# --- state snapshots -------------------------------------------------------------------


def run_with_states(thread: ThreadState, log: EventLog, key: str, *states: Any) -> RunRecord:
    run = open_run(thread, log, key)
    for state in states:
        log.append(run, StateSnapshotEvent(snapshot=state))
    return run


def snapshots(events: list[SequencedEvent]) -> list[Any]:
    return [e.event.snapshot for e in events if isinstance(e.event, StateSnapshotEvent)]


OUTBOXES = [{"outbox": [{"to": f"{n}@b.com", "subject": "hi"} for n in range(k)]} for k in range(5)]


def test_a_state_snapshot_is_logged_as_the_patch_from_the_one_before_and_read_whole() -> None:
    thread, log = new_log()
    first = run_with_states(thread, log, "u1", OUTBOXES[0], OUTBOXES[1])
    second = run_with_states(thread, log, "u2", OUTBOXES[1], OUTBOXES[2], "a string")

    logged = thread.events
    assert logged[0].state_patch is None and logged[0].event.snapshot == OUTBOXES[0]
    assert all(item.state_patch is not None for item in logged[1:])
    assert all(item.event.snapshot is None for item in logged[1:])
    assert logged[2].state_patch == [], "the same state again is an empty patch"
    assert logged[3].state_patch == [
        {"op": "add", "path": "/outbox/1", "value": {"to": "1@b.com", "subject": "hi"}}
    ]
    assert snapshots(log.events_of(first)) == OUTBOXES[:2]
    assert snapshots(log.events_of(second)) == [OUTBOXES[1], OUTBOXES[2], "a string"]
    assert snapshots(log.page(0)[0]) == [*OUTBOXES[:2], OUTBOXES[1], OUTBOXES[2], "a string"]


SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-2, 2), st.sampled_from([1.0, 0.5]))
ITEMS = st.recursive(
    SCALARS | st.text('a,]\\"~/', max_size=3),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text("ab", max_size=2), inner),
    max_leaves=6,
)
STATES = st.dictionaries(
    st.text("a/~", max_size=2), st.lists(ITEMS, max_size=3) | ITEMS, max_size=3
)


@given(STATES, st.data())
def test_a_state_patch_makes_the_snapshot_and_an_appending_one_is_the_librarys(
    before: dict[str, Any], data: st.DataObject
) -> None:
    after = {
        key: list(value) if isinstance(value, list) else value for key, value in before.items()
    }
    for value in after.values():
        if isinstance(value, list) and data.draw(st.booleans()):
            value.extend(data.draw(st.lists(ITEMS, min_size=1, max_size=2)))
    if data.draw(st.booleans()):
        after = data.draw(STATES)

    patch = state_patch(budgets.to_json(before), budgets.to_json(after), after)

    made = jsonpatch.apply_patch(before, patch)
    # As JSON, where 1, 1.0 and true differ, members in any order.
    assert json.dumps(made, sort_keys=True) == json.dumps(after, sort_keys=True)
    library = jsonpatch.JsonPatch.from_diff(
        before, after, dumps=lambda v: budgets.to_json(v).decode()
    )
    if all(op["op"] == "add" for op in library.patch):
        assert patch == library.patch


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ([1], [12, 3]),
        ([1], [1.0, None]),
        (["a"], ["a\\", "b"]),
        ([[1]], [[1, 2], 3]),
        ([{"a": 1}], [{"a": 1, "b": 2}, 3]),
    ],
)
def test_an_array_whose_json_only_begins_as_before_did_is_not_taken_as_added_to(
    before: list[Any], after: list[Any]
) -> None:
    patch = state_patch(budgets.to_json({"k": before}), budgets.to_json({"k": after}), {"k": after})

    made = jsonpatch.apply_patch({"k": before}, patch)
    assert json.dumps(made) == json.dumps({"k": after})


def test_values_python_finds_equal_but_json_does_not_are_told_apart() -> None:
    thread, log = new_log()
    run = run_with_states(thread, log, "u1", {"a": 1}, {"a": True}, {"a": 1.0}, {"a": 1})

    read = snapshots(log.events_of(run))

    assert [type(state["a"]) for state in read] == [int, bool, float, int]


def test_the_logged_snapshot_is_the_state_when_it_was_emitted() -> None:
    thread, log = new_log()
    thread.state = {"outbox": []}
    run = open_run(thread, log, "u1")

    log.append(run, StateSnapshotEvent(snapshot=thread.state))
    thread.state["outbox"].append({"to": "a@b.com"})
    log.append(run, StateSnapshotEvent(snapshot=thread.state))
    thread.state["outbox"].append({"to": "c@d.com"})

    assert snapshots(log.events_of(run)) == [
        {"outbox": []},
        {"outbox": [{"to": "a@b.com"}]},
    ]


def test_reading_snapshots_in_any_order_gives_each_its_own_state() -> None:
    thread, log = new_log()
    run = run_with_states(thread, log, "u1", *OUTBOXES)
    events = log.events_of(run)

    for index in [4, 0, 3, 1, 2, 4]:
        again = log.events_of(run, after=events[index].seq - 1)
        assert snapshots(again)[0] == OUTBOXES[index]


def test_a_continue_as_new_carries_its_first_state_snapshot_whole() -> None:
    thread, log = new_log()
    run_with_states(thread, log, "u1", OUTBOXES[0], OUTBOXES[1])
    run_with_states(thread, log, "u2", OUTBOXES[2], OUTBOXES[3])
    run_with_states(thread, log, "u3", OUTBOXES[4])

    carried = log.carried(2)
    later = EventLog(carried, clock=lambda: NOW)

    assert carried.events[0].state_patch is None
    assert carried.events[0].event.snapshot == OUTBOXES[2]
    assert carried.events[1].state_patch is not None
    assert thread.events[2].state_patch is not None, "the thread's own log is unchanged"
    assert snapshots(later.page(0)[0]) == OUTBOXES[2:]
    run = run_with_states(carried, later, "u4", OUTBOXES[0])
    assert carried.events[-1].state_patch is not None
    assert snapshots(later.events_of(run)) == [OUTBOXES[0]]


def test_a_trimmed_log_keeps_in_place_what_a_continue_as_new_carries() -> None:
    thread, log = new_log()
    run_with_states(thread, log, "u1", OUTBOXES[0], OUTBOXES[1])
    run_with_states(thread, log, "u2", OUTBOXES[2], OUTBOXES[3])
    third = run_with_states(thread, log, "u3", OUTBOXES[4])
    carried = log.carried(2)

    log.trim(2)

    assert (thread.runs, thread.events) == (carried.runs, carried.events)
    assert snapshots(log.page(0)[0]) == OUTBOXES[2:]
    assert log.next_seq() == 6
    fourth = run_with_states(thread, log, "u4", OUTBOXES[0])
    assert snapshots(log.events_of(fourth)) == [OUTBOXES[0]]
    assert snapshots(log.events_of(third)) == [OUTBOXES[4]]


def test_a_runs_logged_patches_make_its_snapshots_from_the_last_state_before_it() -> None:
    thread, log = new_log()
    assert log.last_state() is None
    run_with_states(thread, log, "u1", OUTBOXES[0], OUTBOXES[1])
    before = log.last_state()
    run = run_with_states(thread, log, "u2", OUTBOXES[3], OUTBOXES[3], OUTBOXES[4])

    patches = log.state_patches(run)

    assert before == budgets.to_json(OUTBOXES[1])
    assert patches is not None and patches[1] == []
    events = known_state.leave_out(log.events_of(run), before, patches)[0]
    whole = known_state.fill_in(events, OUTBOXES[1], patches)
    assert snapshots(whole) == [OUTBOXES[3], OUTBOXES[3], OUTBOXES[4]]
    first, again, last = snapshots(whole)
    assert again is first and last is not first, "one copy for the same state, an empty patch apart"
    assert budgets.to_json(OUTBOXES[1]) == before, "the client's state is left as it is"
    unchanged = known_state.fill_in(events, OUTBOXES[1], [[], [], []])
    assert all(each is OUTBOXES[1] for each in snapshots(unchanged)), "nothing to copy"
    # A run whose first snapshot the log keeps whole has no patches of its own.
    first = thread.runs[0]
    assert log.state_patches(first) is None


# --- replay ----------------------------------------------------------------------------


def test_a_replay_opens_and_closes_the_run_under_the_new_run_id() -> None:
    thread, log = new_log()
    run = open_run(thread, log, "u1")
    events: list[Event] = [
        RunStartedEvent(thread_id="t1", run_id="r1", protocol_version=PROTOCOL_VERSION),
        text("a"),
        RunFinishedEvent(thread_id="t1", run_id="r1"),
    ]
    for event in events:
        log.append(run, event)

    replayed = log.replay(run, "r2")

    assert seqs(replayed) == seqs(log.events_of(run))
    assert {e.run_key for e in replayed} == {"u1"}
    started, content, finished = (e.event for e in replayed)
    assert isinstance(started, RunStartedEvent) and started.run_id == "r2"
    assert isinstance(finished, RunFinishedEvent) and finished.run_id == "r2"
    assert isinstance(content, TextMessageContentEvent) and content.delta == "a"
    kept = [e.event for e in log.events_of(run)]
    assert isinstance(kept[0], RunStartedEvent) and kept[0].run_id == "r1", "the log keeps it"
    assert isinstance(kept[-1], RunFinishedEvent) and kept[-1].run_id == "r1"
