"""A map bounded by what its entries cost, for what a gateway process keeps per thread
only to do less work (sent messages and snapshots, history positions): whatever it
forgets is worked out again, never lost."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class LeastRecent(Generic[K, V]):
    """A map that forgets its least recently used entries once their costs, as
    ``cost`` counts each, pass ``max_bytes``."""

    def __init__(self, max_bytes: int, cost: Callable[[K, V], int]) -> None:
        self._max_bytes = max_bytes
        self._cost = cost
        self._entries: OrderedDict[K, V] = OrderedDict()
        self._bytes = 0

    def __bool__(self) -> bool:
        return bool(self._entries)

    def get(self, key: K) -> V | None:
        """The entry of ``key``, now the most recently used; ``None`` without one."""
        found = self._entries.get(key)
        if found is not None:
            self._entries.move_to_end(key)
        return found

    def put(self, key: K, value: V) -> None:
        """Keep ``value`` as ``key``'s entry, forgetting the least recently used past
        the bound."""
        self.forget(key)
        self._entries[key] = value
        self._bytes += self._cost(key, value)
        while self._bytes > self._max_bytes:
            old_key, old = self._entries.popitem(last=False)
            self._bytes -= self._cost(old_key, old)

    def forget(self, key: K) -> None:
        """Drop ``key``'s entry, if it has one."""
        old = self._entries.pop(key, None)
        if old is not None:
            self._bytes -= self._cost(key, old)
