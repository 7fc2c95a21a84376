"""The CPU the stack spends, split by process: the dev server and this one.

The dev server is the child process ``WorkflowEnvironment.start_local`` spawned; the SDK
does not expose its pid, so :func:`server_pid` finds it as this process's child named
``temporal`` in ``/proc`` (Linux only, as the bench machine is). This process holds the
engine's worker (its Python code and the Temporal core's native threads), the gateway,
the bench's own worker and the bench's HTTP clients, so its share includes what a
client costs: an upper bound on the worker's and gateway's together.
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass
from pathlib import Path


def children(pid: int) -> dict[int, list[bytes]]:
    """The processes whose parent is ``pid``, each with its command line."""
    found = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            if parent == pid:
                found[int(stat.parent.name)] = (stat.parent / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue  # it exited meanwhile
    return found


def server_pid() -> int:
    """The pid of the dev server this process started.

    Raises:
        RuntimeError: Not exactly one child process running ``temporal``.
    """
    found = [pid for pid, argv in children(os.getpid()).items() if argv[0].endswith(b"temporal")]
    if len(found) != 1:
        raise RuntimeError(f"expected one dev server child process, found {found}")
    return found[0]


def ticks(stat: Path) -> int:
    """The CPU time a process or thread has used, in clock ticks (``utime + stime``),
    from its ``stat`` file in ``/proc`` (Linux)."""
    fields = stat.read_text().rsplit(")", 1)[1].split()
    # Fields 14 and 15 of proc(5), counted from the state (field 3) here.
    return int(fields[11]) + int(fields[12])


def cpu_seconds(pid: int) -> float:
    """The CPU time process ``pid`` has used (``utime + stime``, Linux)."""
    return ticks(Path(f"/proc/{pid}/stat")) / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class CpuSplit:
    """CPU seconds, by process."""

    server: float
    """The dev server's (clock ticks: read it over many operations, not one)."""
    bench: float
    """This process's: worker, gateway and the bench's clients."""

    @property
    def total(self) -> float:
        """Both together: the stack's."""
        return self.server + self.bench

    def __sub__(self, other: CpuSplit) -> CpuSplit:
        return CpuSplit(self.server - other.server, self.bench - other.bench)

    def __add__(self, other: CpuSplit) -> CpuSplit:
        return CpuSplit(self.server + other.server, self.bench + other.bench)

    def per(self, count: float) -> CpuSplit:
        """The share of each of ``count`` operations (or seconds)."""
        return CpuSplit(self.server / count, self.bench / count)


def cpu_now(pid: int) -> CpuSplit:
    """The CPU spent so far by dev server ``pid`` and by this process (utime + stime)."""
    return CpuSplit(cpu_seconds(pid), time.process_time())


async def idle_cpu(pid: int, seconds: float) -> CpuSplit:
    """The CPU per second dev server ``pid`` and this process spend while nothing is
    sent, over ``seconds``: pollers, timers, housekeeping. Per-operation figures include
    it, the more the slower the operations."""
    before = cpu_now(pid)
    await asyncio.sleep(seconds)
    return (cpu_now(pid) - before).per(seconds)
