"""How the gateway's process tunes Python's cyclic garbage collector.

The gateway allocates in bursts: a run's resent conversation is parsed, validated,
digested and encoded whole, so a long thread's run makes tens of thousands of container
objects that live until its request ends. At CPython's default threshold (700 net
allocations) each such run set off dozens of young collections, every one walking the
burst in flight while freeing almost nothing: the objects die by reference counting once
the request is done. A higher threshold lets a burst pass without a collection; cyclic
garbage is still collected once it reaches the threshold.

The worker keeps CPython's default. It was chosen while workflows ran in Temporal's
sandbox, whose evicted workflows a high threshold let pile up as cyclic garbage; without
the sandbox a high threshold saves the worker about 1% of a long thread's turn, too
little to give up the default under which its memory was measured flat.
``docs/bench.md``, "The garbage collector" and "The resume without the client's share",
has the measurements.
"""

from __future__ import annotations

import gc


def configure(threshold: int) -> None:
    """Collect the young generation after ``threshold`` net allocations
    (``AGUI_GATEWAY_GC_THRESHOLD``), keeping the older generations' thresholds (each
    counted in collections of the one before)."""
    _, middle, oldest = gc.get_threshold()
    gc.set_threshold(threshold, middle, oldest)
