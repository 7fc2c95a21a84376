"""``python -m bench.threads``: the CPU of running processes, by the kind of thread that
spent it.

It reads each process's threads in ``/proc/<pid>/task`` (Linux) before and after a
window and prints what each kind of thread spent in it: the process's main thread (a
worker's or a gateway's event loop), and the others by their name (``comm``):
``tokio-rt-worker`` for the Temporal core's native threads, ``python`` for the threads
Python started (a worker runs its workflow activations in them). Run it beside a client
that keeps the stack busy and divide by the client's cycles, as "A growing thread's
cycle at c=16, thread by thread" in ``docs/bench.md`` does.
"""

from __future__ import annotations

import argparse
import os
import time
from collections import Counter
from pathlib import Path

from bench.cpu import ticks

MAIN = "main"
"""The kind of a process's main thread, whatever its name."""


def thread_ticks(pid: int) -> dict[int, tuple[str, int]]:
    """Each live thread of process ``pid``: its kind and the CPU it has used so far, in
    clock ticks (``utime + stime``)."""
    threads = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            name = (task / "comm").read_text().strip()
            used = ticks(task / "stat")
        except OSError:
            continue  # it exited meanwhile
        threads[int(task.name)] = (MAIN if int(task.name) == pid else name, used)
    return threads


def spent(before: dict[int, tuple[str, int]], after: dict[int, tuple[str, int]]) -> Counter[str]:
    """CPU seconds by kind of thread between two :func:`thread_ticks` readings; a thread
    started in between counts from zero, one that ended in between is not counted."""
    by_kind: Counter[str] = Counter()
    for tid, (kind, used) in after.items():
        by_kind[kind] += used - before.get(tid, (kind, 0))[1]
    hertz = os.sysconf("SC_CLK_TCK")
    return Counter({kind: count / hertz for kind, count in by_kind.items()})


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.threads", description=__doc__)
    parser.add_argument(
        "processes",
        nargs="+",
        metavar="NAME=PID",
        help="the processes to read, each named as the output should show it",
    )
    parser.add_argument("--seconds", type=float, default=12.0, help="the window's length")
    args = parser.parse_args()
    pids = {name: int(pid) for name, pid in (process.split("=", 1) for process in args.processes)}
    before = {name: thread_ticks(pid) for name, pid in pids.items()}
    time.sleep(args.seconds)
    after = {name: thread_ticks(pid) for name, pid in pids.items()}
    for name in pids:
        kinds = spent(before[name], after[name])
        print(f"{name}: {sum(kinds.values()):.2f} s of CPU in {args.seconds:g} s")
        for kind, seconds in kinds.most_common():
            print(f"  {kind:20} {seconds:7.2f} s")


if __name__ == "__main__":
    main()
