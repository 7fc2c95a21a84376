"""The thread's event log: every run's AG-UI events, each with its sequence number.

Runs never interleave (the thread serves one at a time), so a run's events are one slice
of the log, from its ``first_seq`` to its ``last_seq``. Clients read that slice while the
run is in progress and again later, by reconnecting or by repeating the run.

Snapshots are kept small, as continue-as-new carries the log (``LoggedEvent``): a
``MESSAGES_SNAPSHOT`` by the conversation's length then, a ``STATE_SNAPSHOT`` by its
JSON Patch from the one before; :meth:`EventLog.sequenced` gives them back whole.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Container
from datetime import datetime
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    import jsonpatch
    import pydantic_core
    from ag_ui.core import (
        Event,
        Message,
        MessagesSnapshotEvent,
        RunFinishedEvent,
        RunStartedEvent,
        StateSnapshotEvent,
    )

    from workflows import budgets
    from workflows.known_messages import message_digest, prefix_digest
    from workflows.models import (
        KnownMessages,
        LoggedEvent,
        RunRecord,
        SequencedEvent,
        ThreadState,
    )

LOG_PAGE_EVENTS = 500
"""The most events one read of the whole log (``EventLog.page``) returns."""
LOG_PAGE_BYTES = 1024 * budgets.KIB
"""The most bytes of events (snapshots expanded) one read of the whole log returns,
past its first event: an answer stays far below Temporal's limits of a query's result."""


class EventLog:
    """The events, runs and messages of one thread's ``ThreadState``, as a log.

    Everything it keeps is in the thread's state, which is what continue-as-new carries;
    it only remembers, to save work, what it derived from it (message ids, sizes and
    digests, the newest state snapshot it rebuilt).
    The conversation and the events carried are held to their budgets
    (``workflows/budgets.py``) by dropping the oldest.

    Args:
        thread: The thread whose log this is.
        clock: Stamps events that come without a timestamp (``workflow.now`` in the
            thread, so a replay stamps them the same).
    """

    def __init__(self, thread: ThreadState, clock: Callable[[], datetime]) -> None:
        self._thread = thread
        self._clock = clock
        self._message_ids = {message.id for message in thread.messages}
        self._dropped_ids = set(thread.dropped_message_ids)
        encoded = [budgets.to_json(message) for message in thread.messages]
        self._message_sizes = [len(data) for data in encoded]
        self._message_digests = [message_digest(data) for data in encoded]
        self._state: tuple[int, bytes] | None = None
        """The ``seq`` of the ``STATE_SNAPSHOT`` last logged or rebuilt, and its snapshot
        as JSON (``budgets.to_json``): the next one's patch is made from it, rebuilding
        those after it starts there, and callers get copies decoded from it, which cost
        a fraction of a deep copy."""

    def knows(self, message_id: str) -> bool:
        """Whether the conversation has (or had, and dropped) the message ``message_id``."""
        return known(message_id, self._message_ids, self._dropped_ids)

    def add_message(self, message: Message, encoded: bytes) -> None:
        """Append ``message`` (``encoded`` as ``budgets.to_json``, within its budget) to
        the conversation, then drop the oldest messages past
        ``budgets.KEPT_MESSAGES_BYTES``."""
        thread = self._thread
        thread.messages.append(message)
        self._message_ids.add(message.id)
        self._message_sizes.append(len(encoded))
        self._message_digests.append(message_digest(encoded))
        dropped = budgets.messages_to_drop(self._message_sizes)
        if not dropped:
            return
        gone = thread.messages[:dropped]
        del thread.messages[:dropped], self._message_sizes[:dropped]
        del self._message_digests[:dropped]
        thread.messages_dropped += dropped
        digests = [budgets.id_digest(m.id) for m in gone]
        self._message_ids.difference_update(m.id for m in gone)
        thread.dropped_message_ids = (thread.dropped_message_ids + digests)[
            -budgets.DROPPED_IDS_KEPT :
        ]
        self._dropped_ids = set(thread.dropped_message_ids)

    def begins_with(self, known: KnownMessages) -> bool:
        """Whether the conversation's first messages are exactly ``known``'s."""
        digests = self._message_digests
        return known.count <= len(digests) and prefix_digest(digests[: known.count]) == known.digest

    def next_seq(self) -> int:
        """The sequence number the next event gets."""
        events = self._thread.events
        return events[-1].seq + 1 if events else 1

    def append(self, run: RunRecord, event: Event, messages_upto: int | None = None) -> None:
        """Append ``event`` to the log as the latest event of ``run``, the run in progress."""
        if event.timestamp is None:
            event.timestamp = int(self._clock().timestamp() * 1000)
        seq = self.next_seq()
        item = LoggedEvent(seq=seq, run_key=run.key, event=event, messages_upto=messages_upto)
        if isinstance(event, StateSnapshotEvent):
            item = self._keep_state(item, event)
        self._thread.events.append(item)
        run.last_seq = seq

    def _keep_state(self, item: LoggedEvent, event: StateSnapshotEvent) -> LoggedEvent:
        """``item``, a ``STATE_SNAPSHOT``, as the log keeps it: with a copy of its
        snapshot (an agent may go on changing the state it snapshotted) if it is the
        log's first, else as the patch from the previous one."""
        encoded = budgets.to_json(event.snapshot)
        snapshot = pydantic_core.from_json(encoded)
        previous = self._last_state_at(len(self._thread.events))
        base = None if previous is None else self._state_at(previous)
        self._state = (item.seq, encoded)
        if base is None:
            whole = event.model_copy(update={"snapshot": snapshot})
            return item.model_copy(update={"event": whole})
        patch = state_patch(base, encoded, snapshot)
        return item.model_copy(
            update={"event": event.model_copy(update={"snapshot": None}), "state_patch": patch}
        )

    def _whole_state(self, item: LoggedEvent) -> Event:
        """The ``STATE_SNAPSHOT`` ``item`` of the log with its whole snapshot."""
        if item.state_patch is None:
            return item.event
        index = item.seq - self._thread.events[0].seq
        snapshot = pydantic_core.from_json(self._state_at(index))
        return item.event.model_copy(update={"snapshot": snapshot})

    def _last_state_at(self, end: int) -> int | None:
        """The index of the log's last ``STATE_SNAPSHOT`` before index ``end``."""
        events = self._thread.events
        for index in range(end - 1, -1, -1):
            if isinstance(events[index].event, StateSnapshotEvent):
                return index
        return None

    def _state_at(self, index: int) -> bytes:
        """The snapshot of the ``STATE_SNAPSHOT`` at ``index`` as JSON, rebuilt from the
        last whole one before it (or the one last rebuilt) by its patches."""
        events = self._thread.events
        patches: list[list[dict[str, Any]]] = []
        at: int | None = index
        while at is not None:
            item = events[at]
            if self._state is not None and self._state[0] == item.seq:
                base = self._state[1]
                break
            if item.state_patch is None:
                base = budgets.to_json(item.event.snapshot)  # type: ignore[union-attr]
                break
            patches.append(item.state_patch)
            at = self._last_state_at(at)
        else:
            raise AssertionError("the log's first STATE_SNAPSHOT is kept whole")
        if not patches:
            return base
        state = pydantic_core.from_json(base)
        for patch in reversed(patches):
            state = jsonpatch.apply_patch(state, patch, in_place=True)
        encoded = budgets.to_json(state)
        self._state = (events[index].seq, encoded)
        return encoded

    def append_messages_snapshot(self, run: RunRecord) -> None:
        """Append the whole conversation, logged by its length (see ``LoggedEvent``)."""
        thread = self._thread
        upto = thread.messages_dropped + len(thread.messages)
        self.append(run, MessagesSnapshotEvent(messages=[]), upto)

    def events_of(self, run: RunRecord, after: int = 0) -> list[SequencedEvent]:
        """The events of ``run`` with ``seq > after``, as clients see them.

        Empty for a run without events yet, and for one whose events the thread no
        longer carries (see ``carried``).
        """
        return [self.sequenced(item) for item in self._items_of(run, after)]

    def _items_of(self, run: RunRecord, after: int = 0) -> list[LoggedEvent]:
        """The events of ``run`` with ``seq > after`` as the log keeps them."""
        events = self._thread.events
        if not events:
            return []
        base = events[0].seq
        if run.last_seq < max(run.first_seq, base):
            return []
        start = max(run.first_seq, after + 1) - base
        return events[max(start, 0) : run.last_seq - base + 1]

    def last_state(self) -> bytes | None:
        """The snapshot of the log's last ``STATE_SNAPSHOT`` as JSON (``budgets.to_json``);
        ``None`` without one."""
        index = self._last_state_at(len(self._thread.events))
        return None if index is None else self._state_at(index)

    def state_patches(self, run: RunRecord) -> list[list[dict[str, Any]]] | None:
        """The patches the log keeps for the ``STATE_SNAPSHOT``s of ``run``, in order, each
        from the one logged before it; ``None`` if it keeps one of them whole."""
        patches = []
        for item in self._items_of(run):
            if isinstance(item.event, StateSnapshotEvent):
                if item.state_patch is None:
                    return None
                patches.append(item.state_patch)
        return patches

    def page(self, after: int) -> tuple[list[SequencedEvent], bool]:
        """The oldest events of the whole log with ``seq > after``, at most
        ``LOG_PAGE_EVENTS`` of them and ``LOG_PAGE_BYTES`` (but at least one event when
        there is one), as clients see them; and whether more follow.

        The log starts at the oldest event the thread carries: events of runs dropped
        at a continue-as-new are not in it.
        """
        events = self._thread.events
        start = bisect.bisect_right(events, after, key=lambda item: item.seq)
        page: list[SequencedEvent] = []
        size = 0
        for item in events[start : start + LOG_PAGE_EVENTS]:
            event = self.sequenced(item)
            size += budgets.json_size(event)
            if page and size > LOG_PAGE_BYTES:
                break
            page.append(event)
        return page, start + len(page) < len(events)

    def sequenced(self, item: LoggedEvent) -> SequencedEvent:
        """``item`` as clients see it: a snapshot gets its messages or state back."""
        event = self._whole_state(item)
        if item.messages_upto is not None:
            # Messages dropped since are no longer in it.
            kept = max(item.messages_upto - self._thread.messages_dropped, 0)
            messages = self._thread.messages[:kept]
            event = event.model_copy(update={"messages": messages})
        return SequencedEvent(seq=item.seq, run_key=item.run_key, event=event)

    def replay(self, run: RunRecord, run_id: str) -> list[SequencedEvent]:
        """The events of ``run`` again, opened and closed under the replaying ``run_id``:
        a client that repeats a run gets its events under the ``runId`` it sent."""
        events = []
        for item in self.events_of(run):
            event = item.event
            if isinstance(event, RunStartedEvent | RunFinishedEvent):
                event = event.model_copy(update={"run_id": run_id})
            events.append(item.model_copy(update={"event": event}))
        return events

    def carried(self, runs: int) -> ThreadState:
        """The thread for the next workflow run: only its last ``runs`` runs, with their
        events, fewer if their events are over ``budgets.CARRIED_EVENT_BYTES``, so what
        continue-as-new carries stays bounded; the rest of it whole.

        The first ``STATE_SNAPSHOT`` carried is made whole again, as the one its patch
        was made from is not carried.
        """
        kept = self._thread.runs[-runs:]
        sizes = dict.fromkeys((run.key for run in kept), 0)
        for item in self._thread.events:
            if item.run_key in sizes:
                sizes[item.run_key] += budgets.json_size(item)
        kept = kept[len(kept) - budgets.runs_to_carry([sizes[run.key] for run in kept]) :]
        first_seq = kept[0].first_seq if kept else self.next_seq()
        events = [item for item in self._thread.events if item.seq >= first_seq]
        for position, item in enumerate(events):
            if isinstance(item.event, StateSnapshotEvent):
                whole = self._whole_state(item)
                events[position] = item.model_copy(update={"event": whole, "state_patch": None})
                break
        return self._thread.model_copy(update={"runs": kept, "events": events})

    def trim(self, runs: int) -> None:
        """Keep only what ``carried(runs)`` would carry, in place: a workflow run that
        serves many runs (pinned to its build, it continues as new only to move) holds
        no more of them than one that continued as new."""
        kept = self.carried(runs)
        self._thread.runs, self._thread.events = kept.runs, kept.events


def known(message_id: str, kept: Container[str], dropped: Container[str]) -> bool:
    """Whether a conversation has, or had and dropped, the message ``message_id``:
    ``kept`` holds the ids of its messages, ``dropped`` the digests of the dropped ones'
    ids (``budgets.id_digest``, as ``ThreadState.dropped_message_ids``)."""
    return message_id in kept or budgets.id_digest(message_id) in dropped


def state_patch(base: bytes, encoded: bytes, snapshot: Any) -> list[dict[str, Any]]:
    """The JSON Patch that makes ``snapshot`` (``encoded`` as ``budgets.to_json``) from
    the state ``base`` (as JSON).

    Most runs leave the state as they found it: comparing the two as JSON (where 1 and
    true differ) is much cheaper than the patch library's diff, which is given the same
    JSON to compare values by, for the same reason. Most of the others add to its arrays
    (:func:`_appended`).
    """
    if base == encoded:
        return []
    before = pydantic_core.from_json(base)
    appended = _appended(before, snapshot)
    if appended is not None:
        return appended
    return jsonpatch.JsonPatch.from_diff(before, snapshot, dumps=_json_text).patch


def _appended(before: Any, after: Any) -> list[dict[str, Any]] | None:
    """The patch the library makes from the object ``before`` to ``after`` where the two
    have the same members and those that differ are arrays with items added at their
    end; ``None`` for any other change.

    A state grows that way (the demo's outbox, a log of results), and the library finds
    it by writing every item of each array as JSON, so a state's patch cost what the
    state had grown to. Here an array's JSON before, without its closing bracket, begins
    its JSON after, followed by a comma: JSON values delimit themselves, so the items
    before are the first items after.
    """
    if not isinstance(before, dict) or not isinstance(after, dict):
        return None
    if before.keys() != after.keys():
        return None
    patch: list[dict[str, Any]] = []
    for key, old in before.items():
        new = after[key]
        old_json, new_json = budgets.to_json(old), budgets.to_json(new)
        if old_json == new_json:
            continue
        if not (isinstance(old, list) and isinstance(new, list) and len(new) > len(old)):
            return None
        if old and not (
            new_json.startswith(old_json[:-1]) and new_json[len(old_json) - 1] == ord(",")
        ):
            return None
        patch.extend(
            {
                "op": "add",
                "path": jsonpatch.JsonPointer.from_parts([key, index]).path,
                "value": value,
            }
            for index, value in enumerate(new[len(old) :], start=len(old))
        )
    return patch


def _json_text(value: Any) -> str:
    """``value`` as ``budgets.to_json`` writes it: what the patch library compares values
    by, instead of its ``json.dumps``, which costs several times as much."""
    return budgets.to_json(value).decode()
