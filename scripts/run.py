"""``make run``: the whole system in one terminal.

Starts the embedded Temporal dev server (unless ``TEMPORAL_ADDRESS`` names one already
running), the worker and the gateway; restarts the worker or gateway if either dies, as a
process manager would; and on Ctrl-C or SIGTERM stops them in order: gateway, worker,
then Temporal, which flushes its SQLite file so the next ``make run`` finds every thread.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / ".data"
TEMPORAL_CLI = Path(sys.executable).parent / "temporal"
TEMPORAL_PORT = 7233
UI_PORT = 8233
RESTART_DELAY_SECONDS = 1.0
STOP_TIMEOUT_SECONDS = 30.0


@dataclass
class Service:
    """A child process that is restarted whenever it exits on its own."""

    name: str
    argv: list[str]
    env: dict[str, str]
    process: asyncio.subprocess.Process | None = None
    restarts: int = 0
    stopping: bool = False
    supervisor: asyncio.Task[None] | None = field(default=None, repr=False)

    async def start(self) -> None:
        # A session of its own: Ctrl-C reaches only this launcher, which stops the
        # children in order instead of all at once.
        self.process = await asyncio.create_subprocess_exec(
            *self.argv, cwd=ROOT, env=self.env, start_new_session=True
        )
        self.supervisor = asyncio.create_task(self._supervise())

    async def _supervise(self) -> None:
        assert self.process is not None
        while True:
            code = await self.process.wait()
            if self.stopping:
                return
            self.restarts += 1
            log(f"{self.name} exited with {code}; restarting (restart #{self.restarts})")
            await asyncio.sleep(RESTART_DELAY_SECONDS)
            self.process = await asyncio.create_subprocess_exec(
                *self.argv, cwd=ROOT, env=self.env, start_new_session=True
            )

    async def stop(self) -> None:
        self.stopping = True
        process = self.process
        if process is None or process.returncode is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(process.wait(), STOP_TIMEOUT_SECONDS)
        except TimeoutError:
            log(f"{self.name} did not stop in {STOP_TIMEOUT_SECONDS:.0f}s; killing it")
            process.kill()
            await process.wait()


def log(message: str) -> None:
    print(f"[run] {message}", flush=True)


async def wait_until_up(url: str, what: str, timeout: float = 60.0) -> None:
    """Wait for ``url`` to answer 200, failing after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    async with httpx.AsyncClient(timeout=2) as http:
        while True:
            try:
                if (await http.get(url)).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit(f"{what} did not come up within {timeout:.0f}s ({url})")
            await asyncio.sleep(0.2)


async def main() -> None:
    env = dict(os.environ)
    services: list[Service] = []
    embedded = "TEMPORAL_ADDRESS" not in env
    if embedded:
        DATA.mkdir(exist_ok=True)
        env["TEMPORAL_ADDRESS"] = f"localhost:{TEMPORAL_PORT}"
        services.append(
            Service(
                "temporal",
                [
                    str(TEMPORAL_CLI),
                    "server",
                    "start-dev",
                    "--db-filename",
                    str(DATA / "temporal.sqlite"),
                    "--port",
                    str(TEMPORAL_PORT),
                    "--ui-port",
                    str(UI_PORT),
                    "--log-level",
                    "warn",
                ],
                env,
            )
        )
    gateway_port = env.get("AGUI_GATEWAY_PORT", "8000")
    services += [
        Service("worker", [sys.executable, "worker.py"], env),
        Service("gateway", [sys.executable, "-m", "gateway"], env),
    ]

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)

    try:
        for service in services:
            await service.start()
            if service.name == "temporal":
                # The dev server's metrics-free health check: its Web UI answers once the
                # frontend is serving.
                await wait_until_up(f"http://localhost:{UI_PORT}", "Temporal")
        await wait_until_up(f"http://127.0.0.1:{gateway_port}/healthz", "The gateway")
        log("up:")
        if embedded:
            log(f"  Temporal        {env['TEMPORAL_ADDRESS']} (data in {DATA / 'temporal.sqlite'})")
            log(f"  Temporal Web UI http://localhost:{UI_PORT}")
        else:
            log(f"  Temporal        {env['TEMPORAL_ADDRESS']} (external)")
        log(f"  Gateway         http://localhost:{gateway_port}  (agents: GET /agents)")
        log("Ctrl-C stops everything.")
        await stop.wait()
    finally:
        log("stopping")
        for service in reversed(services):
            await service.stop()
        log("stopped")


if __name__ == "__main__":
    asyncio.run(main())
