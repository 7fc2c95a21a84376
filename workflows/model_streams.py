"""Who takes a model activity's streamed output: the routing a thread and a sub-agent
run share for their ``model_stream`` signal (``activities.chat.DeltaSender``)."""

from __future__ import annotations

from collections.abc import Callable

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from workflows.models import ModelDelta


class ModelStreams:
    """The listeners of the model activities in flight, by activity id."""

    def __init__(self) -> None:
        self._listeners: dict[str, Callable[[ModelDelta], None]] = {}

    def listen(self, activity_id: str, listener: Callable[[ModelDelta], None] | None) -> None:
        """Route activity ``activity_id``'s streamed output to ``listener`` (``None``:
        stop; ``TurnHost.listen``)."""
        if listener is None:
            del self._listeners[activity_id]
        else:
            self._listeners[activity_id] = listener

    def deliver(self, delta: ModelDelta) -> Exception | None:
        """Hand ``delta`` to its listener; what the listener raised, which a signal
        handler must not (it would fail the workflow task). A late delta, of a step
        already done, is dropped."""
        listener = self._listeners.get(delta.activity_id)
        if listener is None:
            return None
        try:
            listener(delta)
        except Exception as error:
            return error
        return None
