"""A ``STATE_SNAPSHOT`` is written by the gateway as ``ag_ui``'s encoder writes it, its
state serialised directly (``gateway.event_json.encode_state_snapshot``)."""

from __future__ import annotations

from typing import Any

from ag_ui.core import StateSnapshotEvent
from ag_ui.encoder import EventEncoder
from hypothesis import given
from hypothesis import strategies as st

from gateway.event_json import encode_state_snapshot

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda values: st.lists(values, max_size=4) | st.dictionaries(st.text(), values, max_size=4),
    max_leaves=20,
)


@given(
    st.dictionaries(st.text(), JSON, max_size=5),
    st.none() | st.integers(min_value=0, max_value=2**53 - 1),
    st.none() | st.dictionaries(st.text(), JSON, max_size=2),
)
def test_a_state_snapshot_is_written_as_the_encoder_writes_it(
    state: dict[str, Any], timestamp: int | None, raw_event: dict[str, Any] | None
) -> None:
    event = StateSnapshotEvent(snapshot=state, timestamp=timestamp, raw_event=raw_event)
    assert encode_state_snapshot(event) == EventEncoder().encode(event)


def test_a_snapshot_that_is_not_an_object_is_written_the_same_too() -> None:
    for snapshot in ([1, "two", None], "text", None, {}):
        event = StateSnapshotEvent(snapshot=snapshot)
        assert encode_state_snapshot(event) == EventEncoder().encode(event)
