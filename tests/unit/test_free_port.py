"""``bench.stack.free_port``: ports that no outgoing connection can take before the
server they are for binds them."""

from __future__ import annotations

import secrets
import socket

import pytest

from bench.stack import LOWEST_PICKED_PORT, ephemeral_range, free_port


def test_ports_are_outside_the_ephemeral_range_distinct_and_free() -> None:
    ephemeral = ephemeral_range()
    ports = [free_port() for _ in range(50)]
    assert len(set(ports)) == len(ports)
    assert all(LOWEST_PICKED_PORT <= port < 65536 and port not in ephemeral for port in ports)
    for port in ports[:5]:
        with socket.socket() as server:
            server.bind(("127.0.0.1", port))


def test_a_port_something_listens_on_is_not_handed_out(monkeypatch: pytest.MonkeyPatch) -> None:
    pick = secrets.choice
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        first = [busy, busy]
        monkeypatch.setattr(
            "bench.stack.secrets.choice", lambda ports: first.pop() if first else pick(ports)
        )
        assert free_port() != busy
        assert not first
