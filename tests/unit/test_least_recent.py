"""The bounded map a gateway process keeps its per-thread shortcuts in."""

from __future__ import annotations

from gateway.least_recent import LeastRecent


def _map(max_bytes: int) -> LeastRecent[str, bytes]:
    return LeastRecent(max_bytes, lambda key, value: len(key) + len(value))


def test_past_the_bound_the_least_recently_used_are_forgotten() -> None:
    kept = _map(12)
    kept.put("a", b"11111")
    kept.put("b", b"22222")
    assert kept.get("a") == b"11111"  # now the most recently used
    kept.put("c", b"33333")

    assert (kept.get("a"), kept.get("b"), kept.get("c")) == (b"11111", None, b"33333")


def test_an_entry_put_again_or_forgotten_no_longer_counts() -> None:
    kept = _map(12)
    kept.put("a", b"11111")
    kept.put("a", b"22222")
    kept.put("b", b"33333")
    assert (kept.get("a"), kept.get("b")) == (b"22222", b"33333")

    kept.forget("a")
    kept.forget("missing")
    kept.put("c", b"44444")
    assert (kept.get("a"), kept.get("b"), kept.get("c")) == (None, b"33333", b"44444")


def test_an_entry_past_the_bound_alone_is_not_kept() -> None:
    kept = _map(4)
    kept.put("a", b"11111")

    assert kept.get("a") is None
    assert not kept
