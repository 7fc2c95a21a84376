"""``python -m bench.threads`` puts a process's CPU on the kind of thread that spent it
(``docs/bench.md``, "A growing thread's cycle at c=16, thread by thread")."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bench.threads import MAIN, spent, thread_ticks

WORKER = """
import sys, threading

def work():
    sys.stdin.readline()
    print(sum(i * i for i in range(4_000_000)), flush=True)
    sys.stdin.readline()

thread = threading.Thread(target=work)
thread.start()
print("ready", flush=True)
thread.join()
"""
"""A process whose second thread does a fixed amount of work when told to, while its
main thread waits for it."""


def test_a_process_s_cpu_goes_to_the_thread_that_spent_it() -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", WORKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert child.stdin is not None and child.stdout is not None
    try:
        assert child.stdout.readline() == "ready\n"
        # Python's threads take the process's name; its main thread is told apart by its id.
        name = Path(f"/proc/{child.pid}/comm").read_text().strip()
        before = thread_ticks(child.pid)
        child.stdin.write("go\n")
        child.stdin.flush()
        assert child.stdout.readline().strip().isdigit()
        after = thread_ticks(child.pid)
        child.stdin.write("stop\n")
        child.stdin.flush()
        assert child.wait(timeout=30) == 0
    finally:
        child.kill()
    assert {kind for kind, _ in after.values()} == {MAIN, name}, after
    kinds = spent(before, after)
    assert kinds[name] >= 0.05, kinds
    assert kinds[MAIN] < kinds[name], kinds
